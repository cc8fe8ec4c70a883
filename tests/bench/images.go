package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// benchImages measures one appliance seeding another: `staticpodd images
// export` of a ~100 MB two-layer image from one store, then `images import`
// of the archive into an empty store (layers unpacked), against skopeo doing
// the same trip between OCI layouts (`skopeo copy oci:… oci-archive:…`, then
// `oci-archive:… oci:…`; skopeo stores blobs and unpacks nothing). Each run
// imports into a new empty store; the times are medians.
func benchImages(bin string, runs, padMB int) error {
	if bin == "" {
		return fmt.Errorf("need -staticpodd (make bench sets it)")
	}
	skopeo, err := exec.LookPath("skopeo")
	if err != nil { // a peer missing: say so, run the others
		fmt.Printf("\nimage export + import round trip: NOT MEASURED: skopeo is not installed (apt-get install -y skopeo)\n")
		return nil
	}
	dir, err := os.MkdirTemp("", "staticpodd-bench-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "image.tar")
	const ref = "example.com/bench/roundtrip:v1"
	if out, err := exec.Command("go", "run", "./rootfs/mkimage", "-busybox", "/bin/busybox", "-ref", ref,
		"-pad", strconv.Itoa(padMB<<20), "-o", archive).CombinedOutput(); err != nil {
		return fmt.Errorf("images: build image: %v\n%s", err, out)
	}
	fi, err := os.Stat(archive)
	if err != nil {
		return err
	}
	run := func(name string, args ...string) (time.Duration, error) {
		start := time.Now()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%s %v: %v\n%s", name, args, err, out)
		}
		return time.Since(start), nil
	}
	src := filepath.Join(dir, "src")
	if _, err := run(bin, "images", "import", archive, "--root-dir", src, "--run-dir", filepath.Join(dir, "run")); err != nil {
		return err
	}
	layout := filepath.Join(dir, "layout")
	if _, err := run(skopeo, "copy", "-q", "docker-archive:"+archive, "oci:"+layout+":v1"); err != nil {
		return err
	}
	var ourExp, ourImp, theirExp, theirImp, ours, theirs []time.Duration
	for i := range runs {
		out, dst := filepath.Join(dir, "out.tar"), filepath.Join(dir, fmt.Sprintf("dst%d", i))
		e, err := run(bin, "images", "export", ref, "-o", out, "--root-dir", src, "--run-dir", filepath.Join(dir, "run"))
		if err != nil {
			return err
		}
		m, err := run(bin, "images", "import", out, "--root-dir", dst, "--run-dir", filepath.Join(dir, "run"))
		if err != nil {
			return err
		}
		ourExp, ourImp, ours = append(ourExp, e), append(ourImp, m), append(ours, e+m)
		removeTree(dst)
		os.Remove(out)

		sout, sdst := filepath.Join(dir, "skopeo.tar"), filepath.Join(dir, fmt.Sprintf("sdst%d", i))
		e, err = run(skopeo, "copy", "-q", "oci:"+layout+":v1", "oci-archive:"+sout+":v1")
		if err != nil {
			return err
		}
		m, err = run(skopeo, "copy", "-q", "oci-archive:"+sout+":v1", "oci:"+sdst+":v1")
		if err != nil {
			return err
		}
		theirExp, theirImp, theirs = append(theirExp, e), append(theirImp, m), append(theirs, e+m)
		os.RemoveAll(sdst)
		os.Remove(sout)
	}
	fmt.Printf("\nimage export + import round trip: a %.0f MB two-layer image (busybox + %d MB of random bytes), %d runs, medians\n\n",
		float64(fi.Size())/1e6, padMB, runs)
	fmt.Printf("| | export | import | round trip | ratio |\n|---|---|---|---|---|\n")
	fmt.Printf("| staticpodd images export / import (unpacks layers) | %s | %s | %s | %.2f |\n", ms(median(ourExp)), ms(median(ourImp)), ms(median(ours)),
		float64(median(ours))/float64(median(theirs)))
	fmt.Printf("| skopeo copy oci → oci-archive → oci (blobs only) | %s | %s | %s | 1 |\n", ms(median(theirExp)), ms(median(theirImp)), ms(median(theirs)))
	return nil
}
