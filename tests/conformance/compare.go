// Package conformance compares staticpodd's /pods with the real kubelet's on
// the same manifests (the test has build tag conformance; make
// test-conformance runs it). This file holds what needs no root: flattening
// and normalising two PodLists, and the checked-in list of intended
// differences with the table docs/kubelet-differences.md shows of it.
package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Field is one leaf of a pod's JSON: its path, with list elements named by
// their name (containers, statuses) or type (conditions) rather than their
// index, and its normalised value.
type Field struct {
	Path  string
	Value string
}

// keyOf names list elements: conditions by type, everything else that has one
// by name.
func keyOf(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	for _, k := range []string{"type", "name"} {
		if s, ok := m[k].(string); ok {
			return s, true
		}
	}
	return "", false
}

// Flatten is every leaf of v (a decoded JSON value) under prefix, sorted by path.
func Flatten(prefix string, v any) []Field {
	var out []Field
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				out = append(out, Field{p, "{}"})
			}
			for k, e := range x {
				walk(p+"."+k, e)
			}
		case []any:
			if len(x) == 0 {
				out = append(out, Field{p, "[]"})
			}
			for i, e := range x {
				if k, ok := keyOf(e); ok {
					walk(fmt.Sprintf("%s[%s]", p, k), e)
				} else {
					walk(fmt.Sprintf("%s[%d]", p, i), e)
				}
			}
		case nil:
			out = append(out, Field{p, "null"})
		default:
			b, _ := json.Marshal(x)
			out = append(out, Field{p, string(b)})
		}
	}
	walk(prefix, v)
	slices.SortFunc(out, func(a, b Field) int { return strings.Compare(a.Path, b.Path) })
	return out
}

var (
	timeRE   = regexp.MustCompile(`^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"$`)
	digestRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	ctrIDRE  = regexp.MustCompile(`^"([a-z]+)://[0-9a-f]+"$`)
)

// Normalise replaces what differs between any two runs: times, the pod's UID
// (and config.hash, the same value), digests and container IDs (the runtime's
// name, before ://, is kept: it differs on purpose).
func Normalise(fs []Field, uid string) []Field {
	out := make([]Field, 0, len(fs))
	for _, f := range fs {
		v := f.Value
		switch {
		case uid != "" && strings.Contains(v, uid):
			v = strings.ReplaceAll(v, uid, "<uid>")
		case timeRE.MatchString(v):
			v = `"<time>"`
		case ctrIDRE.MatchString(v):
			v = ctrIDRE.ReplaceAllString(v, `"$1://<id>"`)
		}
		v = digestRE.ReplaceAllString(v, "sha256:<digest>")
		out = append(out, Field{f.Path, v})
	}
	return out
}

// Diff is one field on which the two sides differ; a field one side lacks
// has the value "<absent>" there.
type Diff struct {
	Pod, Path     string
	Kubelet, Ours string
	Explained     *Intended // nil: not an intended difference
}

func (d Diff) String() string {
	return fmt.Sprintf("%s: %s: kubelet %s, staticpodd %s", d.Pod, d.Path, d.Kubelet, d.Ours)
}

// Compare lists the fields of pod on which kubelet and ours differ.
func Compare(pod string, kubelet, ours []Field) []Diff {
	k := map[string]string{}
	for _, f := range kubelet {
		k[f.Path] = f.Value
	}
	o := map[string]string{}
	for _, f := range ours {
		o[f.Path] = f.Value
	}
	var paths []string
	for p := range k {
		paths = append(paths, p)
	}
	for p := range o {
		if _, ok := k[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var out []Diff
	for _, p := range paths {
		kv, kok := k[p]
		ov, ook := o[p]
		if !kok {
			kv = "<absent>"
		}
		if !ook {
			ov = "<absent>"
		}
		if kv != ov {
			out = append(out, Diff{Pod: pod, Path: p, Kubelet: kv, Ours: ov})
		}
	}
	return out
}

// Intended is one line of the intended differences: the pods and the field
// (globs: * is any run of characters) on which staticpodd differs from the
// kubelet on purpose, and the paragraph of docs/kubelet-differences.md (its
// bold lead) that says why.
type Intended struct {
	Line             int
	Pod, Field, Para string
	pod, field       *regexp.Regexp
	Used             int // how many differences it explained
}

func glob(s string) *regexp.Regexp {
	return regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(s), `\*`, ".*") + "$")
}

// ParseIntended reads the intended differences: one per line, pod glob,
// field glob and paragraph separated by tabs; # starts a comment.
func ParseIntended(file string) ([]*Intended, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*Intended
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, "\t")
		var cols []string
		for _, p := range parts {
			if p = strings.TrimSpace(p); p != "" {
				cols = append(cols, p)
			}
		}
		if len(cols) != 3 {
			return nil, fmt.Errorf("%s:%d: want pod glob, field glob and paragraph separated by tabs, got %d columns", file, n, len(cols))
		}
		out = append(out, &Intended{Line: n, Pod: cols[0], Field: cols[1], Para: cols[2], pod: glob(cols[0]), field: glob(cols[1])})
	}
	return out, sc.Err()
}

// Explain marks each difference an intended one explains.
func Explain(ds []Diff, intended []*Intended) {
	for i := range ds {
		for _, in := range intended {
			if in.pod.MatchString(ds[i].Pod) && in.field.MatchString(ds[i].Path) {
				ds[i].Explained = in
				in.Used++
				break
			}
		}
	}
}

// CheckParagraphs returns an error naming each intended difference whose
// paragraph docs does not have (as a bold lead, **Para**).
func CheckParagraphs(intended []*Intended, docs string) error {
	var missing []string
	for _, in := range intended {
		if !strings.Contains(docs, "**"+in.Para+"**") {
			missing = append(missing, fmt.Sprintf("line %d: no paragraph **%s**", in.Line, in.Para))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("intended differences without their paragraph in kubelet-differences.md:\n%s", strings.Join(missing, "\n"))
	}
	return nil
}

// Table markers in docs/kubelet-differences.md.
const (
	TableBegin = "<!-- BEGIN intended status differences: generated from tests/conformance/intended.txt -->"
	TableEnd   = "<!-- END intended status differences -->"
)

// Table is the Markdown table of the intended differences.
func Table(intended []*Intended) string {
	var b strings.Builder
	b.WriteString("| pods | field | why |\n| --- | --- | --- |\n")
	for _, in := range intended {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", in.Pod, in.Field, in.Para)
	}
	return b.String()
}

// WithTable is docs with the text between the table markers replaced by table.
func WithTable(docs, table string) (string, error) {
	i := strings.Index(docs, TableBegin)
	j := strings.Index(docs, TableEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("kubelet-differences.md has no %q ... %q", TableBegin, TableEnd)
	}
	return docs[:i+len(TableBegin)] + "\n" + table + docs[j:], nil
}
