package bundle

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// writeLayoutTar writes the OCI layout in dir as a tar to w (gzipped if
// gz): oci-layout, index.json, then the blobs in name order, so that the
// same layout gives the same bytes. Symlinks are followed: a layout made
// over another's blobs tars as one of its own.
func writeLayoutTar(dir string, w io.Writer, gz bool) error {
	if gz {
		zw := gzip.NewWriter(w)
		defer zw.Close()
		if err := writeLayoutTar(dir, zw, false); err != nil {
			return err
		}
		return zw.Close()
	}
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		return err
	}
	names := []string{"oci-layout", "index.json"}
	for _, b := range blobs {
		names = append(names, "blobs/sha256/"+b.Name())
	}
	sort.Strings(names[2:])
	tw := tar.NewWriter(w)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	for _, name := range names {
		if err := tarFile(tw, filepath.Join(dir, filepath.FromSlash(name)), name); err != nil {
			return err
		}
	}
	return tw.Close()
}

func tarFile(tw *tar.Writer, p, name string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: fi.Size(), Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
