package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	goyaml "go.yaml.in/yaml/v2"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// MaxSize is the largest manifest read, the kubelet's maxConfigLength.
const MaxSize = 10 << 20

// ParseFile reads one Pod (YAML or JSON, apiVersion v1, kind Pod) from the file at
// path, names, defaults and validates it as the kubelet does for node nodeName.
// Unknown fields are tolerated; each gives a warning naming the field path and
// the file. A manifest that cannot be used returns an error made of *Error values.
// The pod has no kubernetes.io/config.seen annotation yet: see Stamp.
func ParseFile(data []byte, path, nodeName string) ([]Pod, []string, error) {
	doc, js, err := toJSON(data, path)
	if err != nil {
		return nil, nil, err
	}
	if err := checkKind(doc, path, "Pod"); err != nil {
		return nil, nil, err
	}
	pod, warnings, err := parsePod(doc, js, SourceFile, path, nodeName, "")
	if n := documents(data); n > 1 {
		warnings = append(warnings, fmt.Sprintf("%s: %d YAML documents; only the first is used (one Pod per file, as the kubelet reads it)", path, n))
	}
	if err != nil {
		return nil, warnings, err
	}
	return []Pod{pod}, warnings, nil
}

// documents counts the non-empty YAML documents in data.
func documents(data []byte) int {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	n := 0
	for {
		doc, err := r.Read()
		if err != nil {
			return n
		}
		if len(bytes.TrimSpace(doc)) > 0 && !bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
			n++
		}
	}
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

// ParseURL reads a Pod or a PodList from a URL's body, as ParseFile does. The
// kubelet takes all of a list or none of it; so does ParseURL.
func ParseURL(data []byte, url, nodeName string) ([]Pod, []string, error) {
	doc, js, err := toJSON(data, url)
	if err != nil {
		return nil, nil, err
	}
	m, _ := doc.(map[string]any)
	if m["kind"] != "PodList" {
		if err := checkKind(doc, url, "Pod"); err != nil {
			return nil, nil, err
		}
		pod, warnings, err := parsePod(doc, js, SourceHTTP, url, nodeName, "")
		if err != nil {
			return nil, warnings, err
		}
		return []Pod{pod}, warnings, nil
	}
	if err := checkKind(doc, url, "PodList"); err != nil {
		return nil, nil, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &list); err != nil {
		return nil, nil, &Error{Origin: url, Field: "items", Reason: err.Error()}
	}
	items, _ := m["items"].([]any)
	var (
		pods     []Pod
		warnings []string
		errs     []error
	)
	for i, raw := range list.Items {
		prefix := fmt.Sprintf("items[%d].", i)
		pod, w, err := parsePod(items[i], raw, SourceHTTP, url, nodeName, prefix)
		warnings = append(warnings, w...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pods = append(pods, pod)
	}
	if len(errs) > 0 {
		return nil, warnings, errors.Join(errs...)
	}
	return pods, warnings, nil
}

// toJSON turns YAML or JSON into JSON and its generic form.
func toJSON(data []byte, origin string) (any, []byte, error) {
	if len(data) > MaxSize {
		return nil, nil, &Error{Origin: origin, Reason: fmt.Sprintf("larger than %d bytes", MaxSize)}
	}
	if strings.TrimSpace(string(data)) == "" {
		return nil, nil, &Error{Origin: origin, Reason: "empty manifest"}
	}
	if err := checkExpansion(data); err != nil {
		return nil, nil, &Error{Origin: origin, Reason: err.Error()}
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, &Error{Origin: origin, Reason: "not YAML or JSON: " + err.Error()}
	}
	doc, err := decodeGeneric(js)
	if err != nil {
		return nil, nil, &Error{Origin: origin, Reason: "not YAML or JSON: " + err.Error()}
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, nil, &Error{Origin: origin, Reason: "not a Kubernetes object"}
	}
	return doc, js, nil
}

func checkKind(doc any, origin, kind string) error {
	m := doc.(map[string]any)
	if m["apiVersion"] != "v1" || m["kind"] != kind {
		return &Error{Origin: origin, Reason: fmt.Sprintf("apiVersion %v, kind %v: want apiVersion v1, kind %s",
			orNone(m["apiVersion"]), orNone(m["kind"]), kind)}
	}
	return nil
}

func orNone(v any) any {
	if v == nil {
		return "(none)"
	}
	return v
}

// parsePod decodes one Pod document, then applies the kubelet's static pod
// treatment. prefix names the document inside a list ("items[2].").
func parsePod(doc any, js []byte, source, origin, nodeName, prefix string) (Pod, []string, error) {
	pod := &v1.Pod{}
	strict, err := sigsjson.UnmarshalStrict(js, pod, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return Pod{}, nil, &Error{Origin: origin, Field: strings.TrimSuffix(prefix, "."), Reason: err.Error()}
	}
	var warnings []string
	for _, e := range strict {
		warnings = append(warnings, fmt.Sprintf("%s: %s%s, ignored", origin, prefix, e.Error()))
	}
	if m, ok := doc.(map[string]any); ok {
		if k, ok := m["kind"]; ok && k != "Pod" {
			return Pod{}, warnings, &Error{Origin: origin, Field: prefix + "kind", Reason: fmt.Sprintf("%v: want Pod", k)}
		}
	}
	if pod.Name == "" {
		return Pod{}, warnings, &Error{Origin: origin, Field: prefix + "metadata.name", Reason: "required"}
	}
	if pod.UID == "" {
		uidOrigin := origin
		if source == SourceFile {
			if uidOrigin, err = uidPath(origin); err != nil {
				return Pod{}, warnings, err
			}
		}
		uid, err := computeUID(doc, source, uidOrigin, nodeName)
		if err != nil {
			return Pod{}, warnings, err
		}
		pod.UID = typesUID(uid)
	}
	setAPIDefaults(pod)
	applyStaticDefaults(pod, source, nodeName)
	if err := validate(pod, origin, prefix); err != nil {
		return Pod{}, warnings, err
	}
	hashes, err := hashContainers(doc, pod)
	if err != nil {
		return Pod{}, warnings, &Error{Origin: origin, Field: strings.TrimSuffix(prefix, "."), Reason: err.Error()}
	}
	pod.Annotations[AnnotationContainerHashes] = hashes
	return Pod{Pod: pod, Source: source, Origin: origin}, warnings, nil
}

// checkExpansion refuses a document that YAML aliases make larger than
// MaxSize once expanded. The yaml library refuses a billion laughs by the
// ratio of aliases to nodes, but a few aliases of one large string pass it,
// and converting the document to JSON writes each of them out: a 1 MiB file
// of 64 aliases of a 1 MiB string took half a GiB. Decoding without
// converting shares what aliases point at, so walking it costs little, and
// the walk stops as soon as it is over.
func checkExpansion(data []byte) error {
	if !bytes.Contains(data, []byte("*")) {
		return nil // no alias: the JSON is about as large as the file
	}
	var doc any
	if err := goyaml.Unmarshal(data, &doc); err != nil {
		return nil // YAMLToJSON says what is wrong with it
	}
	budget := int64(MaxSize)
	var walk func(v any) bool
	walk = func(v any) bool {
		budget -= 8 // a node costs something, even empty
		switch v := v.(type) {
		case string:
			budget -= int64(len(v))
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
		return budget >= 0
	}
	if !walk(doc) {
		return fmt.Errorf("YAML aliases expand it to more than %d bytes", MaxSize)
	}
	return nil
}
