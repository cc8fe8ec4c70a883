package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/daemon"
	"github.com/staticpodd/staticpodd/oci"
	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/image/bar"
)

// newImagesCmd is `staticpodd images import|ls|rm|pin|unpin|export|pull`, working on the store under
// <root-dir>/images directly; the store's lock makes that safe while the daemon runs.
func newImagesCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Manage the local image store",
	}
	open := func(opts ...image.Option) (*image.Store, error) {
		return image.Open(filepath.Join(o.RootDir, "images"), cliLogger(os.Stderr), opts...)
	}
	var configFile, policyFile string
	imp := &cobra.Command{
		Use:   "import FILE...",
		Short: "Import OCI archives, OCI layout dirs or docker-archives (plain, gzip or zstd)",
		Long: "Import OCI archives, OCI layout dirs or docker-archives (plain, gzip or zstd);\n" +
			"FILE - reads an archive from stdin.\n" +
			"An import leaves 100 - imageGCHighThresholdPercent percent of the store's\n" +
			"filesystem free (15% by default; --config reads the value run uses), and\n" +
			"fails before it writes past that, with the store unchanged.\n" +
			"Under an image policy (--image-policy, else $" + config.EnvImagePolicy + "), an\n" +
			"archive the policy refuses is not imported, and the store is unchanged.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := config.Load(configFile, config.Flags{RootDir: o.RootDir, ImagePolicy: policyFile})
			if err != nil {
				return err
			}
			s, _, err := daemon.OpenImages(cfg, cliLogger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			for _, p := range args {
				var imgs []image.Image
				b := bar.New(cmd.ErrOrStderr(), "import "+p)
				if p == "-" {
					imgs, err = s.ImportReader(cmd.Context(), cmd.InOrStdin(), b.Option())
				} else {
					imgs, err = s.Import(cmd.Context(), p, b.Option())
				}
				b.Done()
				if err != nil {
					return err
				}
				for _, img := range imgs {
					fmt.Fprintf(cmd.OutOrStdout(), "imported %s %s\n", shortID(img.ID), strings.Join(img.Refs, " "))
				}
			}
			return nil
		},
	}
	imp.Flags().StringVar(&configFile, config.FlagConfig, "", "KubeletConfiguration file, for imageGCHighThresholdPercent")
	imp.Flags().StringVar(&policyFile, config.FlagImagePolicy, "", "image signature policy (containers-policy.json) the archives must meet (default $"+config.EnvImagePolicy+")")
	cmd.AddCommand(imp)
	var digests bool
	var output string
	ls := &cobra.Command{
		Use:     "ls [--digests] [-o json]",
		Aliases: []string{"list"},
		Short:   "List images",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("unknown output format %q: want json", output)
			}
			s, err := open()
			if err != nil {
				return err
			}
			imgs, err := s.List()
			if err != nil {
				return err
			}
			if output == "json" {
				return printImagesJSON(cmd.OutOrStdout(), imgs, s.LastUsed)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
			header := "REF\tID\tSIZE\tCREATED\tLAST USED\tPINNED"
			if digests {
				header = "REF\tDIGEST\tID\tSIZE\tCREATED\tLAST USED\tPINNED"
			}
			fmt.Fprintln(tw, header)
			for _, img := range imgs {
				refs := img.Refs
				if len(refs) == 0 {
					refs = []string{"<none>"}
				}
				used := "never"
				if t := s.LastUsed(img.ID); !t.IsZero() {
					used = t.UTC().Format(time.RFC3339)
				}
				pinned := ""
				if img.Pinned {
					pinned = "pinned"
				}
				for _, r := range refs {
					row := []string{r}
					if digests {
						row = append(row, repoDigestOf(r, img.RepoDigests))
					}
					row = append(row, shortID(img.ID), humanSize(img.Size), img.Created.UTC().Format(time.RFC3339), used, pinned)
					fmt.Fprintln(tw, strings.Join(row, "\t"))
				}
			}
			return tw.Flush()
		},
	}
	ls.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	ls.Flags().BoolVar(&digests, "digests", false, "show the manifest digest each reference was pulled by (<none> for an imported image)")
	cmd.AddCommand(ls)
	var force bool
	rm := &cobra.Command{
		Use:     "rm REF...",
		Aliases: []string{"remove"},
		Short:   "Remove image references; layers no image uses are deleted",
		Long: "Remove image references; layers no image uses are deleted. An image a\n" +
			"container of a pod uses is refused without --force: its next restart would\n" +
			"find no image and wait with ErrImageNeverPull.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			used, err := oci.ImagesInUse(o.RunDir)
			if err != nil {
				return err
			}
			for _, ref := range args {
				if img, err := s.Get(ref); err == nil && used[img.ID] && !force {
					return fmt.Errorf("image %s is used by a container of a pod (remove the pod first, or use --force)", ref)
				}
				if err := s.Remove(ref); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", ref)
			}
			return nil
		},
	}
	rm.Flags().BoolVarP(&force, "force", "f", false, "remove even an image that pods use")
	cmd.AddCommand(rm)
	for _, pin := range []bool{true, false} {
		use, short := "pin REF...", "Pin images: image garbage collection never removes them"
		if !pin {
			use, short = "unpin REF...", "Unpin images: image garbage collection may remove them again when unused"
		}
		cmd.AddCommand(&cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := open()
				if err != nil {
					return err
				}
				for _, ref := range args {
					img, err := s.Pin(ref, pin)
					if err != nil {
						return err
					}
					verb := "pinned"
					if !pin {
						verb = "unpinned"
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s\n", verb, shortID(img.ID), strings.Join(img.Refs, " "))
				}
				return nil
			},
		})
	}
	cmd.AddCommand(newImagesExportCmd(open))
	cmd.AddCommand(newImagesPullCmd(o), newImagesSignCmd())
	completeImageRefs(cmd, o, open)
	return cmd
}

// imageJSON is one image of `images ls -o json`: the field names of the CRI's
// Image, as `crictl images -o json` prints them, and the store's own.
type imageJSON struct {
	ID          string     `json:"id"`
	RepoTags    []string   `json:"repoTags"`
	RepoDigests []string   `json:"repoDigests"`
	Size        int64      `json:"size"` // bytes, uncompressed
	Pinned      bool       `json:"pinned"`
	Created     time.Time  `json:"created"`
	LastUsed    *time.Time `json:"lastUsed"` // null: never
}

// printImagesJSON writes {"images": [...]}, as crictl's ListImagesResponse.
func printImagesJSON(w io.Writer, imgs []image.Image, lastUsed func(id string) time.Time) error {
	out := struct {
		Images []imageJSON `json:"images"`
	}{Images: []imageJSON{}}
	for _, img := range imgs {
		j := imageJSON{ID: img.ID, RepoTags: append([]string{}, img.Refs...), RepoDigests: append([]string{}, img.RepoDigests...),
			Size: img.Size, Pinned: img.Pinned, Created: img.Created.UTC()}
		if t := lastUsed(img.ID); !t.IsZero() {
			t = t.UTC()
			j.LastUsed = &t
		}
		out.Images = append(out.Images, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// newImagesExportCmd is `staticpodd images export REF... -o FILE`.
func newImagesExportCmd(open func(...image.Option) (*image.Store, error)) *cobra.Command {
	var out string
	export := &cobra.Command{
		Use:   "export REF... -o FILE",
		Short: "Write images to an OCI archive that docker load and images import read too",
		Long: "Write images to one tar that is an OCI image layout and a docker-archive, so\n" +
			"that `staticpodd images import`, `docker load`, `podman load` and skopeo read it.\n" +
			"Layers are written again from the store's unpacked copies: the exported image\n" +
			"has the same references, config and files, and a new image ID. FILE - writes\n" +
			"to stdout; a FILE that is a symlink is refused; FILE appears complete or not at all.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("export: -o FILE is required (- for stdout)")
			}
			s, err := open()
			if err != nil {
				return err
			}
			b := bar.New(cmd.ErrOrStderr(), "export "+out)
			defer b.Done()
			if out == "-" {
				return s.Export(cmd.Context(), cmd.OutOrStdout(), args, b.Option())
			}
			return exportFile(cmd.Context(), s, out, args, b.Option())
		},
	}
	export.Flags().StringVarP(&out, "output", "o", "", "the archive to write (- for stdout)")
	return export
}

// exportFile exports refs into path through a temporary file beside it,
// renamed over path when complete: a rename replaces a symlink rather than
// following it, and a path that is a symlink is refused before anything is
// written.
func exportFile(ctx context.Context, s *image.Store, path string, refs []string, opts ...image.TransferOption) (err error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("export to %s: not a regular file (%s): refused", path, fi.Mode().Type())
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("export to %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := s.Export(ctx, bw, refs, opts...); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export to %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("export to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("export to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("export to %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("export to %s: %w", path, err)
	}
	return nil
}

// cliLogger is a CLI command's logger: warnings and errors, on w.
func cliLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func shortID(id string) string {
	_, hex, _ := strings.Cut(id, ":")
	return hex[:min(12, len(hex))]
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fkB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// repoDigestOf is the manifest digest (sha256:…) of the repository digest of
// ref's repository among repoDigests, or <none>: a digest belongs to the
// repository it was pulled from, as docker images --digests shows it.
func repoDigestOf(ref string, repoDigests []string) string {
	repo, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	for _, d := range repoDigests {
		if r, dg, ok := strings.Cut(d, "@"); ok && r == repo {
			return dg
		}
	}
	return "<none>"
}
