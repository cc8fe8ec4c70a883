package manifest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// AnnotationRestartOnChange lists host files whose contents are part of the
// pod: "/etc/kubernetes/scheduler.conf, /etc/x.key=SIGHUP". A file without a
// signal joins the pod's UID (an edit of it is a new generation, as an edit of
// the manifest is); one with a signal is sent that signal, to the main process
// of each of the pod's running containers, when it changes. An entry
// "configmap/NAME" or "secret/NAME" names a ConfigMap or Secret of the pod's
// namespace instead, whose data joins the UID as a file's contents do.
const AnnotationRestartOnChange = "staticpodd.io/restart-on-change"

// Bounds of AnnotationRestartOnChange: each file is watched and hashed.
const (
	MaxWatchedFiles = 32
	maxWatchedPath  = 4096 // PATH_MAX
)

// WatchedFile is one entry of AnnotationRestartOnChange.
type WatchedFile struct {
	// Path is the file's, or the object's name when Kind is set.
	Path string
	// Signal is the signal's name as lifecycle.stopSignal spells it
	// ("SIGHUP"); empty: the pod restarts instead.
	Signal string
	// Kind, "ConfigMap" or "Secret", is set for an entry naming one:
	// the pod restarts when its data changes (never a signal: its
	// volumes are rewritten by the pod's next sync, which a signal sent
	// at once could overtake).
	Kind string
}

// watchedKinds are the prefixes of an entry naming a ConfigMap or Secret.
var watchedKinds = map[string]string{"configmap/": "ConfigMap", "secret/": "Secret"}

// RestartOnChange returns the files pod's AnnotationRestartOnChange lists, in
// its order: comma-separated entries, blanks around them ignored, each an
// absolute, clean path, with "=SIGNAL" to signal instead of restarting. The
// signal is a name as in lifecycle.stopSignal ("SIGHUP", "SIGRTMIN+3"), in
// any case, with or without "SIG", or a number. Paths hold no ',' or '='.
func RestartOnChange(pod *v1.Pod) ([]WatchedFile, error) {
	value, ok := pod.Annotations[AnnotationRestartOnChange]
	if !ok {
		return nil, nil
	}
	entries := strings.Split(value, ",")
	if len(entries) > MaxWatchedFiles {
		return nil, fmt.Errorf("%d files, more than %d", len(entries), MaxWatchedFiles)
	}
	var out []WatchedFile
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if f, ok, err := watchedObject(e); ok {
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(out, func(o WatchedFile) bool { return o.Kind == f.Kind && o.Path == f.Path }) {
				return nil, fmt.Errorf("%q is listed twice", e)
			}
			out = append(out, f)
			continue
		}
		path, sig, hasSig := strings.Cut(e, "=")
		path = strings.TrimSpace(path)
		switch {
		case path == "":
			return nil, fmt.Errorf("an empty entry: give a file's absolute path (with =SIGNAL to signal instead of restarting), configmap/NAME or secret/NAME")
		case len(path) > maxWatchedPath:
			return nil, fmt.Errorf("a path of %d bytes, more than %d", len(path), maxWatchedPath)
		case !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/":
			return nil, fmt.Errorf("%q is not an absolute, clean path of a file", podspec.Truncate(path, 64))
		case slices.ContainsFunc(out, func(f WatchedFile) bool { return f.Path == path }):
			return nil, fmt.Errorf("%q is listed twice", path)
		}
		f := WatchedFile{Path: path}
		if hasSig {
			n, err := podspec.ParseSignal(strings.TrimSpace(sig))
			if err != nil {
				return nil, fmt.Errorf("file %s: %w", path, err)
			}
			for _, name := range podspec.StopSignalNames {
				if m, _ := podspec.ParseSignal(name); m == n {
					f.Signal = name
					break
				}
			}
			if f.Signal == "" {
				return nil, fmt.Errorf("file %s: signal %s is not one lifecycle.stopSignal takes", path, podspec.Truncate(sig, 32))
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// watchedObject parses an entry "configmap/NAME" or "secret/NAME" (ok:
// it is one), NAME an object's name (a DNS subdomain).
func watchedObject(e string) (WatchedFile, bool, error) {
	for prefix, kind := range watchedKinds {
		name, ok := strings.CutPrefix(e, prefix)
		if !ok {
			continue
		}
		if _, sig, hasSig := strings.Cut(name, "="); hasSig {
			return WatchedFile{}, true, fmt.Errorf("%s: a %s restarts the pod when it changes: no signal (%s)", podspec.Truncate(e, 64), kind, podspec.Truncate(sig, 32))
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return WatchedFile{}, true, fmt.Errorf("%q: not a %s name: %s", podspec.Truncate(e, 64), kind, msgs[0])
		}
		return WatchedFile{Path: name, Kind: kind}, true, nil
	}
	return WatchedFile{}, false, nil
}

// restartOnChange validates the annotation.
func (v *validator) restartOnChange(pod *v1.Pod, p *field.Path) {
	if _, err := RestartOnChange(pod); err != nil {
		v.add(field.Invalid(p.Child("annotations").Key(AnnotationRestartOnChange), podspec.Truncate(pod.Annotations[AnnotationRestartOnChange], 256), err.Error()))
	}
}
