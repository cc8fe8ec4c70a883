package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/oci"
	"github.com/staticpodd/staticpodd/oci/image"
)

// newImagesCmd is `staticpodd images import|ls|rm|pull`, working on the store under
// <root-dir>/images directly; the store's lock makes that safe while the daemon runs.
func newImagesCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Manage the local image store",
	}
	open := func(opts ...image.Option) (*image.Store, error) {
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return image.Open(filepath.Join(o.RootDir, "images"), logger, opts...)
	}
	var configFile string
	imp := &cobra.Command{
		Use:   "import FILE...",
		Short: "Import OCI archives, OCI layout dirs or docker-archives (plain, gzip or zstd)",
		Long: "Import OCI archives, OCI layout dirs or docker-archives (plain, gzip or zstd).\n" +
			"An import leaves 100 - imageGCHighThresholdPercent percent of the store's\n" +
			"filesystem free (15% by default; --config reads the value run uses), and\n" +
			"fails before it writes past that, with the store unchanged.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := config.Load(configFile, config.Flags{})
			if err != nil {
				return err
			}
			s, err := open(imageReserve(cfg))
			if err != nil {
				return err
			}
			for _, p := range args {
				imgs, err := s.Import(cmd.Context(), p)
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
	cmd.AddCommand(imp)
	var digests bool
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List images",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			imgs, err := s.List()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
			header := "REF\tID\tSIZE\tCREATED"
			if digests {
				header = "REF\tDIGEST\tID\tSIZE\tCREATED"
			}
			fmt.Fprintln(tw, header)
			for _, img := range imgs {
				refs := img.Refs
				if len(refs) == 0 {
					refs = []string{"<none>"}
				}
				for _, r := range refs {
					row := []string{r}
					if digests {
						row = append(row, repoDigestOf(r, img.RepoDigests))
					}
					row = append(row, shortID(img.ID), humanSize(img.Size), img.Created.UTC().Format(time.RFC3339))
					fmt.Fprintln(tw, strings.Join(row, "\t"))
				}
			}
			return tw.Flush()
		},
	}
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
	cmd.AddCommand(newImagesPullCmd(o))
	return cmd
}

// imageReserve is the share of the image store's filesystem an import leaves
// free: what the kubelet's image GC would start reclaiming at, since staticpodd
// has no image GC to reclaim it.
func imageReserve(cfg *config.Config) image.Option {
	return image.WithReserve(100 - int(cfg.ImageGCHighThresholdPercent))
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
