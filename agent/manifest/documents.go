package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/staticpodd/staticpodd/agent/objects"
)

// MaxObjects bounds the ConfigMaps and Secrets of one manifest file or URL
// body: each is validated and kept, and a file of a million tiny ones
// would cost more than any node needs.
const MaxObjects = 1000

// multi reads the documents of one manifest: for a file, any number of
// ConfigMaps and Secrets and at most one Pod (a second is not used, as the
// kubelet uses only a file's first document); for a URL, one document: a
// Pod, a PodList, a List of Pods, ConfigMaps and Secrets, or one object.
type multi struct {
	source, origin, nodeName string
	several                  bool // a file of more than one document
	doc                      int  // the document read now, from 1
	budget                   int64
	extraPods                int
	pod                      bool
	objects                  int            // ConfigMap and Secret documents, valid or not
	seen                     map[string]int // object keys, by the document of each
}

// errs turns field errors of the current document into errors of origin,
// naming the document when the file has several.
func (m *multi) errs(list field.ErrorList) []*Error { return m.named(fieldErrors(m.origin, list)) }

func (m *multi) named(errs []*Error) []*Error {
	if m.several {
		for _, e := range errs {
			if e.Field == "" {
				e.Field = fmt.Sprintf("document %d", m.doc)
			} else {
				e.Field = fmt.Sprintf("document %d: %s", m.doc, e.Field)
			}
		}
	}
	return errs
}

func (m *multi) warnings(ws []Warning) []Warning {
	if m.several {
		for i := range ws {
			if ws[i].Field == "" {
				ws[i].Field = fmt.Sprintf("document %d", m.doc)
			} else {
				ws[i].Field = fmt.Sprintf("document %d: %s", m.doc, ws[i].Field)
			}
		}
	}
	return ws
}

func (m *multi) document(data []byte, out *Parsed) {
	doc, js, dup, err := toGeneric(data, m.origin, &m.budget)
	if err != nil {
		out.read = false
		out.Errors = append(out.Errors, m.named([]*Error{err})...)
		return
	}
	out.keep = out.keep || leftOut(doc, data, m.source)
	if dup != nil {
		msg := dup.Error()
		if _, after, ok := strings.Cut(msg, "unmarshal errors:"); ok {
			msg = after
		}
		msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", ";")), " ")
		msg = strings.TrimPrefix(strings.ReplaceAll(msg, " ;", ";"), "; ")
		out.Warnings = append(out.Warnings, m.warnings([]Warning{{Origin: m.origin, Message: msg + "; the last one is used, as the kubelet does"}})...)
	}
	if pastEnd(data) {
		// As the kubelet's decoder, only the first document is read: a
		// Secret written after "..." would be missing without a word.
		out.Warnings = append(out.Warnings, m.warnings([]Warning{{Origin: m.origin,
			Message: `what follows the document's end ("...", a directive such as %YAML, or "---" after a line break other than LF) is not read; separate documents with "---" lines`}})...)
	}
	kinds := []string{"Pod", "ConfigMap", "Secret"}
	if m.source == SourceHTTP {
		kinds = append(kinds, "PodList", "List")
	}
	if errs := checkKind(doc, kinds); len(errs) > 0 {
		out.Errors = append(out.Errors, m.errs(errs)...)
		return
	}
	switch kind := doc["kind"].(string); kind {
	case "Pod":
		if m.pod {
			m.extraPods++
			return
		}
		m.pod = true
		pod, warnings, errs := parsePod(doc, js, m.source, m.origin, m.nodeName, nil)
		out.Warnings = append(out.Warnings, m.warnings(warnings)...)
		out.Errors = append(out.Errors, m.named(errs)...)
		if len(errs) == 0 {
			out.Pods = append(out.Pods, pod)
		}
	case "ConfigMap", "Secret":
		m.object(kind, doc, js, nil, out)
	default:
		m.list(kind, doc, out)
	}
}

// list reads a PodList or a List: the kubelet takes all of a list or none
// of it, and so do the objects of a List.
func (m *multi) list(kind string, doc map[string]any, out *Parsed) {
	items, ok := doc["items"].([]any)
	if !ok && doc["items"] != nil {
		out.Errors = append(out.Errors, m.errs(field.ErrorList{field.Invalid(field.NewPath("items"), doc["items"], "must be a list, not "+jsonKind(doc["items"]))})...)
		return
	}
	kinds := []string{"Pod"}
	if kind == "List" {
		kinds = append(kinds, "ConfigMap", "Secret")
	}
	for i, item := range items {
		p := field.NewPath("items").Index(i)
		doc, ok := item.(map[string]any)
		if !ok {
			out.Errors = append(out.Errors, m.errs(field.ErrorList{field.Invalid(p, item, "must be an object, not "+jsonKind(item))})...)
			continue
		}
		k, ok := doc["kind"]
		switch {
		case !ok && kind == "PodList": // a PodList's items are Pods
			k = "Pod"
		case !ok:
			out.Errors = append(out.Errors, m.errs(field.ErrorList{field.Required(p.Child("kind"), "want "+strings.Join(kinds, " or "))})...)
			continue
		case !slices.Contains(kinds, fmt.Sprint(k)):
			out.Errors = append(out.Errors, m.errs(field.ErrorList{field.NotSupported(p.Child("kind"), k, kinds)})...)
			continue
		}
		if k != "Pod" {
			m.object(k.(string), doc, nil, p, out)
			continue
		}
		pod, warnings, errs := parsePod(doc, nil, m.source, m.origin, m.nodeName, p)
		out.Warnings = append(out.Warnings, warnings...)
		out.Errors = append(out.Errors, errs...)
		if len(errs) == 0 {
			out.Pods = append(out.Pods, pod)
		}
	}
}

// object reads one ConfigMap or Secret document (base: where it is in a
// list) and validates it as the API server would (package objects).
func (m *multi) object(kind string, doc map[string]any, js []byte, base *field.Path, out *Parsed) {
	if m.objects++; m.objects > MaxObjects {
		if m.objects == MaxObjects+1 {
			out.Errors = append(out.Errors, &Error{Origin: m.origin, Reason: fmt.Sprintf("more than %d ConfigMaps and Secrets", MaxObjects)})
		}
		return
	}
	var o *objects.Object
	var verrs field.ErrorList
	if kind == "ConfigMap" {
		cm := &v1.ConfigMap{}
		warnings, errs, err := decode(doc, js, cm, m.origin, base)
		out.Warnings = append(out.Warnings, m.warnings(warnings)...)
		if err != nil {
			out.Errors = append(out.Errors, m.named(append(fieldErrors(m.origin, errs), err))...)
			return
		}
		o, verrs = objects.NewConfigMap(cm, m.source, m.origin, base)
		verrs = append(errs, verrs...)
	} else {
		s := &v1.Secret{}
		warnings, errs, err := decode(doc, js, s, m.origin, base)
		out.Warnings = append(out.Warnings, m.warnings(warnings)...)
		redact(errs, base)
		if err != nil {
			out.Errors = append(out.Errors, m.named(append(fieldErrors(m.origin, errs), err))...)
			return
		}
		o, verrs = objects.NewSecret(s, m.source, m.origin, base)
		verrs = append(errs, verrs...)
	}
	if len(verrs) > 0 {
		out.Errors = append(out.Errors, m.errs(verrs)...)
		return
	}
	if prev, dup := m.seen[o.Key()]; dup {
		out.Errors = append(out.Errors, m.errs(field.ErrorList{field.Duplicate(base.Child("metadata", "name"),
			fmt.Sprintf("%s %s/%s (also document %d)", kind, o.Namespace(), o.Name(), prev))})...)
		return
	}
	m.seen[o.Key()] = m.doc
	out.Objects = append(out.Objects, o)
}

// redact takes the values out of a Secret's type errors: a value of data
// or stringData that is not what it must be is named by its key only.
func redact(errs field.ErrorList, base *field.Path) {
	for _, e := range errs {
		for _, f := range []string{"data", "stringData"} {
			if under(e.Field, base.Child(f).String()) && e.BadValue != nil {
				e.BadValue = objects.Redacted
			}
		}
	}
}

// documents splits data into its non-empty YAML documents. Most manifests
// have one, and the reader copies every line (for a 10 MiB manifest, 40 MiB
// of garbage to find it is one): without a line starting with "---", the
// only separator the reader knows, data is one document.
func documents(data []byte) ([][]byte, error) {
	if !bytes.HasPrefix(data, []byte("---")) && !bytes.Contains(data, []byte("\n---")) {
		return [][]byte{data}, nil
	}
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if t := bytes.TrimSpace(doc); len(t) > 0 && !bytes.Equal(t, []byte("---")) && !onlyComments(t) {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		return [][]byte{data}, nil // empty: toGeneric says so
	}
	return docs, nil
}

// onlyComments reports whether a document holds nothing but comments, as a
// header above the first "---" often does. A comment ends at any of YAML's
// line breaks (yamlLines), a lone CR included: what follows one is read.
func onlyComments(doc []byte) bool {
	for _, line := range yamlLines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}
