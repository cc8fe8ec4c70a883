package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

// urlOptions are how `validate URL` fetches, as the daemon's flags say.
type urlOptions struct {
	headers []string
	caFile  string
}

func (o *urlOptions) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.headers, config.FlagManifestURLHeader, nil, "HTTP header 'Key:Value' sent to a URL argument, as the daemon sends staticPodURLHeader; repeatable")
	fs.StringVar(&o.caFile, config.FlagManifestURLCA, "", "PEM file of CA certificates trusted for an https URL argument, besides the system's")
}

// splitURLs separates the URL arguments of validate from the paths.
func splitURLs(args []string) (paths, urls []string) {
	for _, a := range args {
		if source.IsURL(a) {
			urls = append(urls, a)
		} else {
			paths = append(paths, a)
		}
	}
	return paths, urls
}

// validateURLs fetches each URL as the daemon does (its timeout, size limit,
// redirects and TLS trust) and checks the body with the daemon's parser: a
// Pod, a PodList or a List of Pods, ConfigMaps and Secrets, taken whole or
// not at all.
func validateURLs(ctx context.Context, w io.Writer, urls []string, node string, o urlOptions) error {
	header, err := config.ParseHeaders(o.headers)
	if err != nil {
		return err
	}
	client := source.NewClient(o.caFile, 0)
	pods, bad := 0, 0
	for _, raw := range urls {
		origin := source.Redact(raw)
		body, err := client.Fetch(ctx, raw, header)
		if err != nil {
			fmt.Fprintf(w, "error: %s: %v\n", origin, err)
			bad++
			continue
		}
		p := source.ParseURLBody(body, origin, node)
		for _, warning := range p.Warnings {
			fmt.Fprintf(w, "warning: %s\n", warning)
		}
		if err := p.Err(); err != nil {
			errs := manifest.Errors(err)
			for _, e := range errs {
				fmt.Fprintf(w, "error: %s\n", e)
			}
			if len(errs) == 0 {
				fmt.Fprintf(w, "error: %v\n", err)
			}
			fmt.Fprintf(w, "note: %s: the daemon takes none of its pods: a list is used whole or not at all, as by the kubelet\n", origin)
			bad += max(len(errs), 1)
			continue
		}
		parsed, dropped := source.DropDuplicates(p.Pods)
		for _, e := range manifest.Errors(dropped) {
			fmt.Fprintf(w, "error: %s\n", e)
			bad++
		}
		for _, p := range parsed {
			pods++
			fmt.Fprintf(w, "ok: %s: pod %s/%s, uid %s\n", origin, p.Namespace, p.Name, p.UID)
		}
		for _, o := range p.Objects {
			fmt.Fprintf(w, "ok: %s: %s %s/%s\n", origin, o.Kind(), o.Namespace(), o.Name())
		}
	}
	fmt.Fprintf(w, "%d URL(s), %d pod(s), %d error(s)\n", len(urls), pods, bad)
	if bad > 0 {
		return errors.New("invalid manifests")
	}
	return nil
}

// checkURLs fetches each URL as validateURLs does and records what it found,
// for `validate -o json`: a failed request is an error without a field; a
// list with an invalid item has that item's errors and no pods (the daemon
// takes none of them); an item whose name another item has is an error of
// its own and the first is kept, as the daemon does.
func checkURLs(ctx context.Context, urls []string, node string, o urlOptions) ([]*checked, error) {
	header, err := config.ParseHeaders(o.headers)
	if err != nil {
		return nil, err
	}
	client := source.NewClient(o.caFile, 0)
	var all []*checked
	for _, raw := range urls {
		c := &checked{Source: manifest.SourceHTTP, Origin: source.Redact(raw)}
		all = append(all, c)
		body, err := client.Fetch(ctx, raw, header)
		if err != nil {
			c.fail(err)
			continue
		}
		if len(bytes.TrimSpace(body)) == 0 {
			c.add(source.ParseURLBody(body, c.Origin, node))
			continue
		}
		p := manifest.Check(body, manifest.SourceHTTP, c.Origin, node)
		kept, dropped := source.DropDuplicates(p.Pods)
		p.Pods = kept
		for _, e := range manifest.Errors(dropped) {
			p.Errors = append(p.Errors, e)
		}
		c.add(p)
	}
	return all, nil
}
