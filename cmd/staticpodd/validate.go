package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

// newValidateCmd is `staticpodd validate PATH|URL...`: the daemon's own parser and
// validator over files and directories (not recursive, skipping what the daemon
// skips), and over what URLs serve, fetched as the daemon fetches them. It prints every error and warning and fails on any error.
func newValidateCmd() *cobra.Command {
	var node string
	var urlOpts urlOptions
	cmd := &cobra.Command{
		Use:   "validate PATH|URL...",
		Short: "Check static pod manifests with the daemon's own parser",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				host, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("node name: %w", err)
				}
				node = host
			}
			paths, urls := splitURLs(args)
			var urlErr, pathErr error
			if len(urls) > 0 {
				urlErr = validateURLs(cmd.Context(), cmd.OutOrStdout(), urls, strings.ToLower(node), urlOpts)
			}
			if len(paths) > 0 {
				pathErr = validatePaths(cmd.OutOrStdout(), paths, strings.ToLower(node))
			}
			if urlErr != nil {
				return urlErr
			}
			return pathErr
		},
	}
	cmd.Flags().StringVar(&node, "hostname-override", "", "node name the pod names get (default: the hostname, lower-cased)")
	urlOpts.register(cmd.Flags())
	return cmd
}

func validatePaths(w io.Writer, args []string, node string) error {
	var files []string
	bad := 0
	for _, arg := range args {
		found, err := manifestFiles(w, arg)
		if err != nil {
			fmt.Fprintf(w, "error: %v\n", err)
			bad++
			continue
		}
		files = append(files, found...)
	}
	pods := 0
	owner := map[string]string{} // namespace/name -> file
	for _, file := range files {
		data, err := source.ReadManifest(file)
		if err != nil {
			fmt.Fprintf(w, "error: %s: %v\n", file, err)
			bad++
			continue
		}
		parsed, warnings, err := manifest.ParseFile(data, file, node)
		for _, warning := range warnings {
			fmt.Fprintf(w, "warning: %s\n", warning)
		}
		if err != nil {
			for _, e := range manifest.Errors(err) {
				fmt.Fprintf(w, "error: %s\n", e)
			}
			if len(manifest.Errors(err)) == 0 {
				fmt.Fprintf(w, "error: %v\n", err)
			}
			bad++
			continue
		}
		for _, p := range parsed {
			key := p.Namespace + "/" + p.Name
			if prev, dup := owner[key]; dup {
				fmt.Fprintf(w, "error: %s: pod %s is also defined by %s\n", file, key, prev)
				bad++
				continue
			}
			owner[key] = file
			pods++
			fmt.Fprintf(w, "ok: %s: pod %s, uid %s\n", file, key, p.UID)
		}
	}
	fmt.Fprintf(w, "%d file(s), %d pod(s), %d error(s)\n", len(files), pods, bad)
	if bad > 0 {
		return errors.New("invalid manifests")
	}
	return nil
}

// manifestFiles is what the daemon reads at path: the file itself, or the
// regular files of the directory minus dot-files, backups and subdirectories.
func manifestFiles(w io.Writer, path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		p := filepath.Join(path, e.Name())
		skip, warn := manifest.Skip(e.Name())
		if warn {
			fmt.Fprintf(w, "warning: %s: looks like a backup or editor leftover; the daemon ignores it\n", p)
		}
		if skip {
			continue
		}
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			return nil, err
		case fi.IsDir():
			fmt.Fprintf(w, "warning: %s: a subdirectory; the daemon does not recurse\n", p)
		case fi.Mode().IsRegular():
			files = append(files, p)
		}
	}
	sort.Strings(files)
	return files, nil
}
