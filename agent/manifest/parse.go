package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	goyaml "go.yaml.in/yaml/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/staticpodd/staticpodd/agent/objects"
)

// MaxSize is the largest manifest read, the kubelet's maxConfigLength.
const MaxSize = 10 << 20

// Parsed is what one manifest file or URL body gave: its pods when it can be
// used, and every warning and every error found in it, each naming its field.
type Parsed struct {
	Pods []Pod // nil when there is an error
	// Objects are the ConfigMaps and Secrets beside the pods; nil when
	// there is an error.
	Objects  []*objects.Object
	Warnings []Warning
	Errors   []*Error
	// read says every document was read as an object, and keep that
	// WithoutSecretValues would change the manifest: check knows both from
	// its own reading of the documents.
	read, keep bool
	source     string // the source check read the manifest as
}

// WithoutSecretValues is WithoutSecretValues(data, source) for the data p
// was parsed from, without reading it again when the parse saw that
// nothing would be left out: a manifest of a Pod alone, most of them, is
// kept as it is.
func (p Parsed) WithoutSecretValues(data []byte, source string) []byte {
	if p.read && !p.keep && len(p.Errors) == 0 && source == p.source {
		return data
	}
	return WithoutSecretValues(data, source)
}

// Err joins the errors, nil when there are none.
func (p Parsed) Err() error {
	errs := make([]error, len(p.Errors))
	for i, e := range p.Errors {
		errs[i] = e
	}
	return errors.Join(errs...)
}

func (p Parsed) warnings() []string {
	var out []string
	for _, w := range p.Warnings {
		out = append(out, w.String())
	}
	return out
}

// ParseFile reads one Pod (YAML or JSON, apiVersion v1, kind Pod) from the file at
// path, names, defaults and validates it as the kubelet does for node nodeName.
// Unknown fields are tolerated; each gives a warning naming the field path and
// the file. A manifest that cannot be used returns an error made of *Error values,
// all of them at once. The pod has no kubernetes.io/config.seen annotation yet:
// see Stamp.
func ParseFile(data []byte, path, nodeName string) ([]Pod, []string, error) {
	p := Check(data, SourceFile, path, nodeName)
	return p.Pods, p.warnings(), p.Err()
}

// ParseURL reads a Pod or a PodList from a URL's body, as ParseFile does. The
// kubelet takes all of a list or none of it; so does ParseURL.
func ParseURL(data []byte, url, nodeName string) ([]Pod, []string, error) {
	p := Check(data, SourceHTTP, url, nodeName)
	return p.Pods, p.warnings(), p.Err()
}

// MaxWarnings bounds the warnings Check returns for one manifest: the last
// one says how many more there were. Its author decides how many unknown
// fields it has, and each warning is a manifest problem, an event and a log
// line of the daemon's: thousands would push every other event out of the
// daemon's ring (events.DefaultCapacity) and fill ps and the journal.
const MaxWarnings = 20

// Check reads the manifest data from origin as ParseFile (source SourceFile)
// or ParseURL (SourceHTTP) does, and returns everything it found, at most
// MaxWarnings warnings. The daemon and `staticpodd validate` both read
// manifests through it.
func Check(data []byte, source, origin, nodeName string) Parsed {
	out := check(data, source, origin, nodeName)
	if n := len(out.Warnings); n > MaxWarnings {
		out.Warnings = append(out.Warnings[:MaxWarnings-1:MaxWarnings-1], Warning{Origin: origin,
			Message: fmt.Sprintf("%d more warnings not shown", n-(MaxWarnings-1))})
	}
	return out
}

func check(data []byte, source, origin, nodeName string) Parsed {
	var out Parsed
	if len(data) > MaxSize {
		out.Errors = []*Error{{Origin: origin, Reason: fmt.Sprintf("larger than %d bytes", MaxSize)}}
		return out
	}
	docs, err := documents(data)
	if err != nil {
		out.Errors = []*Error{{Origin: origin, Reason: "not YAML: " + err.Error()}}
		return out
	}
	// As WithoutSecretValues reads them: a URL's documents after the first
	// are left out of what is kept.
	out.read, out.keep, out.source = true, source == SourceHTTP && len(docs) > 1, source
	if source == SourceHTTP {
		// The kubelet decodes a URL's body as one document: the rest of a
		// stream is not read.
		docs = docs[:1]
	}
	m := &multi{source: source, origin: origin, nodeName: nodeName, several: len(docs) > 1,
		budget: MaxSize, seen: map[string]int{}}
	for i, d := range docs {
		m.doc = i + 1
		m.document(d, &out)
	}
	if m.extraPods > 0 {
		out.Warnings = append(out.Warnings, Warning{Origin: origin,
			Message: fmt.Sprintf("%d Pods; only the first is used (one Pod per file, as the kubelet reads it)", m.extraPods+1)})
	}
	if len(out.Errors) > 0 {
		// One file, or one list, is used whole or not at all: a pod
		// does not start without the objects written beside it.
		out.Pods, out.Objects = nil, nil
	}
	return out
}

// uidPath is the path a file pod's UID is computed from: absolute and cleaned,
// so the UID is the same whichever way the path was spelled (`validate ./x.yaml`
// or the daemon's configured /etc/kubernetes/manifests/x.yaml).
func uidPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("absolute path of %s: %w", path, err)
	}
	return abs, nil
}

// toGeneric turns YAML or JSON into its generic form, an object, and JSON.
// dup says which keys were there twice.
// budget is what YAML aliases may still expand to, shared by the documents
// of one manifest.
func toGeneric(data []byte, origin string, budget *int64) (doc map[string]any, js []byte, dup error, _ *Error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, nil, &Error{Origin: origin, Reason: "empty manifest"}
	}
	if err := checkExpansion(data, budget); err != nil {
		return nil, nil, nil, &Error{Origin: origin, Reason: err.Error()}
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		// The kubelet takes the last of two equal keys; so does staticpodd,
		// with a warning.
		if js, dup = yaml.YAMLToJSON(data); dup != nil {
			return nil, nil, nil, &Error{Origin: origin, Reason: "not YAML or JSON: " + dup.Error()}
		}
		dup = err
	}
	generic, err := decodeGeneric(js)
	if err != nil {
		return nil, nil, nil, &Error{Origin: origin, Reason: "not YAML or JSON: " + err.Error()}
	}
	m, ok := generic.(map[string]any)
	if !ok {
		return nil, nil, nil, &Error{Origin: origin, Reason: "not a Kubernetes object: the document is " + jsonKind(generic)}
	}
	return m, js, dup, nil
}

// checkKind wants apiVersion v1 and one of kinds.
func checkKind(doc map[string]any, kinds []string) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name  string
		valid []string
	}{{"apiVersion", []string{"v1"}}, {"kind", kinds}} {
		v, ok := doc[f.name]
		switch s, isString := v.(string); {
		case !ok || v == nil || s == "" && isString:
			errs = append(errs, field.Required(field.NewPath(f.name), "want "+strings.Join(f.valid, " or ")))
		case !isString || !slices.Contains(f.valid, s):
			errs = append(errs, field.NotSupported(field.NewPath(f.name), v, f.valid))
		}
	}
	return errs
}

// decode decodes the generic document doc into out (a pointer to an API
// type), as JSON js when the caller has it (nil: made here). Unknown fields
// are warnings; values of the wrong type are field errors, taken out of the
// document so that the rest decodes and can be validated too. The *Error is
// what the decoder refused when the type check let it through: out is of no
// use then. base names the document inside a list (nil for a document of its
// own).
func decode(doc map[string]any, js []byte, out any, origin string, base *field.Path) ([]Warning, field.ErrorList, *Error) {
	at := func(name string) *field.Path {
		if base == nil {
			return field.NewPath(name)
		}
		return base.Child(name)
	}
	tc := &typeCheck{}
	fields := jsonFields(reflect.TypeOf(out).Elem())
	for k, v := range doc {
		ft, ok := fields[k]
		if !ok {
			tc.unknown = append(tc.unknown, at(k))
			continue
		}
		if !tc.value(v, ft, at(k)) {
			delete(doc, k)
		}
	}
	var warnings []Warning
	slices.SortFunc(tc.unknown, func(a, b *field.Path) int { return strings.Compare(a.String(), b.String()) })
	for _, p := range tc.unknown {
		warnings = append(warnings, Warning{Origin: origin, Field: p.String(), Message: "unknown field, ignored"})
	}
	var err error
	if js == nil || len(tc.errs) > 0 { // what the type check took out must go from the JSON too
		js, err = json.Marshal(doc)
	}
	if err == nil {
		err = sigsjson.UnmarshalCaseSensitivePreserveInts(js, out)
	}
	if err != nil {
		return warnings, tc.errs, &Error{Origin: origin, Field: pathString(base), Reason: err.Error()}
	}
	return warnings, tc.errs, nil
}

// parsePod decodes one Pod document, then applies the kubelet's static pod
// treatment. js is doc as JSON when the caller has it (nil: made here). base
// names the document inside a list (items[2]); nil for a document of its own.
// Every error is returned, not only the first.
func parsePod(doc map[string]any, js []byte, source, origin, nodeName string, base *field.Path) (Pod, []Warning, []*Error) {
	at := func(name string) *field.Path {
		if base == nil {
			return field.NewPath(name)
		}
		return base.Child(name)
	}
	pod := &v1.Pod{}
	warnings, typeErrs, derr := decode(doc, js, pod, origin, base)
	js = nil // a manifest may be 10 MiB: let it go
	if derr != nil {
		return Pod{}, warnings, append(fieldErrors(origin, typeErrs), derr)
	}
	var err error
	errs := typeErrs
	named := pod.Name != ""
	if !named {
		errs = append(errs, field.Required(at("metadata").Child("name"), ""))
	}
	if pod.UID == "" {
		uidOrigin := origin
		if source == SourceFile {
			if uidOrigin, err = uidPath(origin); err != nil {
				return Pod{}, warnings, []*Error{{Origin: origin, Reason: err.Error()}}
			}
		}
		uid, err := computeUID(doc, source, uidOrigin, nodeName)
		if err != nil {
			return Pod{}, warnings, []*Error{{Origin: origin, Reason: err.Error()}}
		}
		pod.UID = typesUID(uid)
	}
	for _, w := range setAPIDefaults(pod, base) {
		warnings = append(warnings, Warning{Origin: origin, Field: w.Field, Message: w.Detail})
	}
	applyStaticDefaults(pod, source, nodeName)
	// What the type check took out would be reported again, as missing or
	// zero: only the first word on a field counts.
	for _, e := range validate(pod, base, named) {
		if !slices.ContainsFunc(typeErrs, func(t *field.Error) bool { return under(e.Field, t.Field) }) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return Pod{}, warnings, fieldErrors(origin, errs)
	}
	hashes, err := hashContainers(doc, pod)
	if err != nil {
		return Pod{}, warnings, []*Error{{Origin: origin, Field: pathString(base), Reason: err.Error()}}
	}
	pod.Annotations[AnnotationContainerHashes] = hashes
	delete(pod.Annotations, AnnotationManifestUID)
	return Pod{Pod: pod, Source: source, Origin: origin}, warnings, nil
}

// checkExpansion refuses a document that YAML aliases make larger than
// MaxSize once expanded. The yaml library refuses a billion laughs by the
// ratio of aliases to nodes, but a few aliases of one large string pass it,
// and converting the document to JSON writes each of them out: a 1 MiB file
// of 64 aliases of a 1 MiB string took half a GiB. Decoding without
// converting shares what aliases point at, so walking it costs little, and
// the walk stops as soon as it is over. budget is shared by the documents
// of one manifest: many documents may not each expand to MaxSize.
func checkExpansion(data []byte, budget *int64) error {
	if !bytes.Contains(data, []byte("*")) {
		return nil // no alias: the JSON is about as large as the file
	}
	var doc any
	if err := goyaml.Unmarshal(data, &doc); err != nil {
		return nil // YAMLToJSON says what is wrong with it
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		*budget -= 8 // a node costs something, even empty
		switch v := v.(type) {
		case string:
			*budget -= int64(len(v))
		case []any:
			for _, e := range v {
				if !walk(e) {
					return false
				}
			}
		case map[any]any:
			for k, e := range v {
				if !walk(k) || !walk(e) {
					return false
				}
			}
		}
		return *budget >= 0
	}
	if !walk(doc) {
		return fmt.Errorf("YAML aliases expand it to more than %d bytes", MaxSize)
	}
	return nil
}

func pathString(p *field.Path) string {
	if p == nil {
		return ""
	}
	return p.String()
}
