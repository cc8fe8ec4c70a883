package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/agent/source"
	"github.com/staticpodd/staticpodd/daemon"
	"github.com/staticpodd/staticpodd/oci"
)

// newValidateCmd is `staticpodd validate PATH|URL...`: the daemon's own parser and
// validator over files and directories (not recursive, skipping what the daemon
// skips), and over what URLs serve, fetched as the daemon fetches them. It prints every error and warning and fails on any error.
func newValidateCmd(o *globalOptions) *cobra.Command {
	var node, output, credDir, policyFile string
	var urlOpts urlOptions
	cmd := &cobra.Command{
		Use:   "validate [--image-policy FILE] PATH|URL...",
		Short: "Check static pod manifests with the daemon's own parser, and the image policy",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && policyFile == "" {
				return errors.New("requires a manifest PATH or URL, or --image-policy FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("unknown output format %q: want json", output)
			}
			if policyFile != "" {
				// The daemon's own reading of it: what would fail its start.
				if _, err := daemon.ImagePolicy(&config.Config{ImagePolicyFile: policyFile}); err != nil {
					return err
				}
				if output == "" {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: valid image policy\n", policyFile)
				}
			}
			if len(args) == 0 {
				return nil
			}
			if node == "" {
				node = daemonNodeName(cmd.Context(), o)
			}
			paths, urls := splitURLs(args)
			if output == "json" {
				return validateJSON(cmd.Context(), cmd.OutOrStdout(), urls, paths, strings.ToLower(node), credDir, urlOpts)
			}
			var urlErr, pathErr error
			if len(urls) > 0 {
				urlErr = validateURLs(cmd.Context(), cmd.OutOrStdout(), urls, strings.ToLower(node), urlOpts)
			}
			if len(paths) > 0 {
				pathErr = validatePaths(cmd.OutOrStdout(), paths, strings.ToLower(node), credDir)
			}
			if urlErr != nil {
				return urlErr
			}
			return pathErr
		},
	}
	cmd.Flags().StringVar(&node, "hostname-override", "", "node name the pod names get (default: the running daemon's, else the hostname, lower-cased)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (one object per manifest)")
	cmd.Flags().StringVar(&credDir, config.FlagCredentialsDirectory, os.Getenv(config.EnvCredentialsDirectory), "directory of the credentials Secrets take values from; none: they are not checked")
	cmd.Flags().StringVar(&policyFile, config.FlagImagePolicy, os.Getenv(config.EnvImagePolicy), "image signature policy (containers-policy.json) to check")
	urlOpts.register(cmd.Flags())
	return cmd
}

// daemonNodeName is the node name of the daemon running on --run-dir (its
// /stats/summary's), else the hostname, the daemon's default: a daemon given
// --hostname-override names its pods <name>-<that name>.
func daemonNodeName(ctx context.Context, o *globalOptions) string {
	var s server.StatsSummary
	if daemon.NewClient(filepath.Join(o.RunDir, socketName)).GetJSON(ctx, "/stats/summary", &s) == nil && s.Node.NodeName != "" {
		return s.Node.NodeName
	}
	host, _ := os.Hostname()
	return host
}

// checked is one manifest file (or URL) as validate reports it; `-o json`
// prints a list of them.
type checked struct {
	Source string `json:"source"` // manifest.SourceFile or manifest.SourceHTTP
	Origin string `json:"origin"` // the file path (as given) or the URL
	// Skipped says why the daemon does not read this file at all (a backup,
	// a subdirectory, a FIFO); such an entry has no pods, warnings or errors.
	Skipped  string       `json:"skipped,omitempty"`
	Pods     []checkedPod `json:"pods"`
	Warnings []issue      `json:"warnings"`
	Errors   []issue      `json:"errors"`
	parsed   []manifest.Pod
	objects  []*objects.Object
}

type checkedPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"` // the full name, <name>-<node>
	UID       string `json:"uid"`
}

// issue is a warning or an error: the field it is about ("" for the whole
// manifest), the offending value as written (shortened) when one is at
// fault, and the reason as the text output prints it.
type issue struct {
	Field  string `json:"field,omitempty"`
	Value  string `json:"value,omitempty"`
	Reason string `json:"reason"`
}

// check parses data from origin with the daemon's parser into c.
func (c *checked) check(data []byte, node string) {
	p := manifest.Check(data, c.Source, c.Origin, node)
	for _, pod := range p.Pods {
		p.Warnings = append(p.Warnings, manifest.PullAlwaysWarnings(pod, c.Origin)...)
	}
	// What this build's daemon would refuse to start (Parsed: no pods then).
	if reason := oci.BuildFeatures().SeccompMissing(); reason != "" {
		for _, pod := range p.Pods {
			p.Errors = append(p.Errors, manifest.SeccompRefusals(pod.Pod, c.Origin, reason)...)
		}
		if len(p.Errors) > 0 {
			p.Pods = nil
		}
	}
	c.add(p)
}

// add records what the parser found.
func (c *checked) add(p manifest.Parsed) {
	for _, w := range p.Warnings {
		c.Warnings = append(c.Warnings, issue{Field: w.Field, Reason: w.Message})
	}
	for _, e := range p.Errors {
		c.Errors = append(c.Errors, issue{Field: e.Field, Value: e.Value, Reason: e.Reason})
	}
	for _, pod := range p.Pods {
		c.Pods = append(c.Pods, checkedPod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)})
	}
	c.parsed = append(c.parsed, p.Pods...)
	c.objects = append(c.objects, p.Objects...)
}

func (c *checked) fail(err error) {
	c.Errors = append(c.Errors, issue{Reason: err.Error()})
}

func validatePaths(w io.Writer, args []string, node, credDir string) error {
	all := checkPaths(args, node, credDir)
	files, pods, bad := 0, 0, 0
	for _, c := range all {
		if c.Skipped != "" {
			continue
		}
		files++
		bad += len(c.Errors)
		if len(c.Errors) == 0 {
			pods += len(c.Pods)
		}
	}
	printChecked(w, all)
	fmt.Fprintf(w, "%d file(s), %d pod(s), %d error(s)\n", files, pods, bad)
	if bad > 0 {
		return errors.New("invalid manifests")
	}
	return nil
}

// validateJSON is `validate -o json`: one object per URL, then one per file,
// in one list, whatever is wrong with them.
func validateJSON(ctx context.Context, w io.Writer, urls, paths []string, node, credDir string, o urlOptions) error {
	all, err := checkURLs(ctx, urls, node, o)
	if err != nil {
		return err
	}
	all = append(all, checkPaths(paths, node, credDir)...)
	bad := 0
	for _, c := range all { // [] rather than null: every key is always there
		bad += len(c.Errors)
		if c.Pods == nil {
			c.Pods = []checkedPod{}
		}
		if c.Warnings == nil {
			c.Warnings = []issue{}
		}
		if c.Errors == nil {
			c.Errors = []issue{}
		}
	}
	if all == nil {
		all = []*checked{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	if bad > 0 {
		return errors.New("invalid manifests")
	}
	return nil
}

// checkPaths reads and checks the manifests the daemon would read at each of
// args, as the daemon reads them, pods with the objects of them all and the
// credentials in credDir ("": not checked).
func checkPaths(args []string, node, credDir string) []*checked {
	var all []*checked
	for _, arg := range args {
		all = append(all, manifestFiles(arg)...)
	}
	owner := map[string]string{} // namespace/name -> origin
	for _, c := range all {
		if c.Skipped != "" || len(c.Errors) > 0 {
			continue
		}
		data, err := source.ReadManifest(c.Origin)
		if err != nil {
			c.fail(err)
			continue
		}
		c.check(data, node)
		// The daemon runs one of two manifests with the same pod name.
		for _, p := range c.Pods {
			key := p.Namespace + "/" + p.Name
			if prev, dup := owner[key]; dup {
				c.Errors = append(c.Errors, issue{Field: "metadata.name", Value: p.Name,
					Reason: fmt.Sprintf("pod %s is also defined by %s", key, prev)})
				continue
			}
			owner[key] = c.Origin
		}
	}
	checkOrder(all, node)
	checkObjects(all, credDir)
	return all
}

// checkObjects checks the pods of the valid manifests with their objects,
// as the daemon uses them together (objects.CheckAll).
func checkObjects(all []*checked, credDir string) {
	var pods []objects.PodOf
	var objs []*objects.Object
	byOrigin := map[string]*checked{}
	for _, c := range all {
		if c.Skipped == "" && len(c.Errors) == 0 {
			byOrigin[c.Origin] = c
			for _, p := range c.parsed {
				pods = append(pods, objects.PodOf{Origin: c.Origin, Pod: p.Pod})
			}
			objs = append(objs, c.objects...)
		}
	}
	for _, i := range objects.CheckAll(pods, objs, source.CredentialReader(credDir)) {
		c := byOrigin[i.Origin]
		if i.Warning {
			c.Warnings = append(c.Warnings, issue{Field: i.Field, Reason: i.Reason})
		} else {
			c.Errors = append(c.Errors, issue{Field: i.Field, Reason: i.Reason})
		}
	}
}

// checkOrder adds what only the whole set of manifests tells, as the daemon
// finds it: start-after cycles and names no valid manifest given defines.
func checkOrder(all []*checked, node string) {
	pods, byOrigin := map[string]manifest.Pod{}, map[string]*checked{}
	for _, c := range all {
		if c.Skipped != "" || len(c.Errors) > 0 {
			continue
		}
		byOrigin[c.Origin] = c
		for _, p := range c.parsed {
			pods[p.Namespace+"/"+p.Name] = p
		}
	}
	blocked := manifest.CheckOrder(pods, node).Blocked
	for _, key := range slices.Sorted(maps.Keys(blocked)) {
		e := blocked[key]
		c := byOrigin[e.Origin]
		c.Errors = append(c.Errors, issue{Field: e.Field, Value: e.Value, Reason: e.Reason})
	}
}

func printChecked(w io.Writer, all []*checked) {
	for _, c := range all {
		if c.Skipped != "" {
			fmt.Fprintf(w, "warning: %s: %s\n", c.Origin, c.Skipped)
			continue
		}
		for _, list := range []struct {
			label  string
			issues []issue
		}{{"warning", c.Warnings}, {"error", c.Errors}} {
			for _, i := range list.issues {
				if i.Field == "" {
					fmt.Fprintf(w, "%s: %s: %s\n", list.label, c.Origin, i.Reason)
				} else {
					fmt.Fprintf(w, "%s: %s: %s: %s\n", list.label, c.Origin, i.Field, i.Reason)
				}
			}
		}
		if len(c.Errors) == 0 {
			for _, p := range c.Pods {
				fmt.Fprintf(w, "ok: %s: pod %s/%s, uid %s\n", c.Origin, p.Namespace, p.Name, p.UID)
			}
			for _, o := range c.objects {
				fmt.Fprintf(w, "ok: %s: %s %s/%s\n", c.Origin, o.Kind(), o.Namespace(), o.Name())
			}
		}
	}
}

// manifestFiles is what the daemon reads at path: the file itself, or the
// regular files of the directory minus dot-files, backups and subdirectories,
// which are listed as skipped. Dot-files are left out silently, as the daemon
// does. An entry that cannot be listed or read carries its error.
func manifestFiles(path string) []*checked {
	entry := func(p string) *checked { return &checked{Source: manifest.SourceFile, Origin: p} }
	fi, err := os.Stat(path)
	if err != nil {
		c := entry(path)
		c.fail(err)
		return []*checked{c}
	}
	if !fi.IsDir() {
		return []*checked{entry(path)}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		c := entry(path)
		c.fail(err)
		return []*checked{c}
	}
	var out []*checked
	for _, e := range entries {
		c := entry(filepath.Join(path, e.Name()))
		skip, warn := manifest.Skip(e.Name())
		if skip && !warn {
			continue
		}
		fi, err := os.Stat(c.Origin) // follows symlinks, as the daemon does
		switch {
		case skip:
			c.Skipped = "looks like a backup or editor leftover; the daemon ignores it"
		case errors.Is(err, fs.ErrNotExist):
			c.Skipped = "a symlink to nothing; the daemon ignores it"
		case err != nil:
			c.fail(err)
		case fi.IsDir():
			c.Skipped = "a subdirectory; the daemon does not recurse"
		case !fi.Mode().IsRegular():
			c.Skipped = fmt.Sprintf("not a regular file (%s); the daemon ignores it", fi.Mode().Type())
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Origin < out[j].Origin })
	return out
}
