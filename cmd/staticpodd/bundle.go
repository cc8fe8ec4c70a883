package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/daemon"
	"github.com/staticpodd/staticpodd/oci/bundle"
)

// newBundleCmd is `staticpodd bundle create|apply|status`; the logic is
// daemon's (CreateBundle, ApplyBundle) and oci/bundle's.
func newBundleCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "bundle", Short: "Create, apply and show signed bundles of manifests and their images"}
	var c daemon.BundleCreate
	create := &cobra.Command{
		Use:   "create --name N --key KEY -o OUT [--push REF] [--image SRC]... PATH...",
		Short: "Pack manifests and every image they name, with its signatures, into one signed bundle",
		Long: "PATHs are manifest files or dirs of them, read as the file source reads them.\n" +
			"Each --image is an OCI archive whose named images are taken, or a registry\n" +
			"reference pulled as it is; every image of the manifests must be supplied.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if c.Out == "" && c.Push == "" {
				return fmt.Errorf("bundle create: -o OUT or --push REF is required")
			}
			c.Paths = args
			created, err := daemon.CreateBundle(cmd.Context(), c)
			if err != nil {
				return err
			}
			defer created.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "bundle %s %s: %d manifests, %d images\n", created.Metadata.Name, created.Digest,
				len(created.Metadata.Manifests), len(created.Metadata.Images))
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&c.Name, "name", "", "the bundle's name (a DNS subdomain)")
	f.StringVar(&c.Key, "key", "", "the private key that signs the bundle (PEM, or cosign's with $COSIGN_PASSWORD)")
	f.StringVarP(&c.Out, "output", "o", "", "the archive to write (an OCI layout tar)")
	f.BoolVar(&c.Gzip, "gzip", false, "gzip the archive")
	f.StringVar(&c.Push, "push", "", "push the bundle to this registry reference too")
	f.StringArrayVar(&c.Images, "image", nil, "an OCI archive or a registry reference supplying images (repeatable)")
	f.BoolVar(&c.AllowSecretValues, "allow-secret-values", false, "let Secrets carry values of their own, not only credential references")
	cmd.AddCommand(create)

	var configFile, policyFile string
	var rollbackAfter time.Duration
	apply := &cobra.Command{
		Use:   "apply FILE|URL|OCI-REF [--rollback-after D]",
		Short: "Verify a bundle under the image policy, import and pin its images, run its manifests",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := config.Load(configFile, config.Flags{RootDir: o.RootDir, ImagePolicy: policyFile})
			if err != nil {
				return err
			}
			rec, err := daemon.ApplyBundle(cmd.Context(), cfg, args[0], rollbackAfter, cliLogger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			daemon.WriteBundleApplied(cmd.OutOrStdout(), rec)
			return nil
		},
	}
	apply.Flags().StringVar(&configFile, config.FlagConfig, "", "KubeletConfiguration file, for imagePolicyFile and the import reserve")
	apply.Flags().StringVar(&policyFile, config.FlagImagePolicy, "", "image signature policy the bundle and its images must meet (default $"+config.EnvImagePolicy+")")
	apply.Flags().DurationVar(&rollbackAfter, "rollback-after", 0, "bring the replaced bundle back if this one's pods are not Ready in this time (0: never)")
	cmd.AddCommand(apply)

	var output string
	status := &cobra.Command{
		Use:   "status [-o json]",
		Short: "Show the bundle the node runs, its digest and signer, and the one before it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := daemon.ReadBundleStatus(o.RootDir)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			st.WriteText(w)
			return nil
		},
	}
	status.Flags().StringVarP(&output, "output", "o", "", "json for JSON")
	cmd.AddCommand(status)
	return cmd
}

// newImagesSignCmd is `staticpodd images sign`.
func newImagesSignCmd() *cobra.Command {
	var key string
	var opts bundle.SignOptions
	sign := &cobra.Command{
		Use:   "sign --key KEY [--identity REF] [--bundle] ARCHIVE [-o OUT]",
		Short: "Sign every image of an OCI archive, the signatures written into its layout",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := daemon.LoadSigner(key)
			if err != nil {
				return err
			}
			signed, err := bundle.SignArchive(cmd.Context(), args[0], s, opts)
			if err != nil {
				return err
			}
			for _, i := range signed {
				fmt.Fprintf(cmd.OutOrStdout(), "signed %s@%s (%s)\n", i.Ref, i.Digest, i.Source)
			}
			return nil
		},
	}
	sign.Flags().StringVar(&key, "key", "", "the private key (PEM, or cosign's with $COSIGN_PASSWORD)")
	sign.Flags().StringVar(&opts.Identity, "identity", "", "the reference the images are signed as (default: each as the archive names it)")
	sign.Flags().BoolVar(&opts.Bundle, "bundle", false, "attach sigstore bundles as OCI referrers, not cosign tag-scheme signatures")
	sign.Flags().StringVarP(&opts.Out, "output", "o", "", "the signed archive to write (default: the archive, replaced)")
	return sign
}
