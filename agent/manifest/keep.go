package manifest

import (
	"bytes"
	"encoding/json"
	"iter"

	"sigs.k8s.io/yaml"
)

// emptyList is what a URL body that was one Secret with values is kept as:
// a good body that gives nothing.
var emptyList = []byte(`{"apiVersion":"v1","kind":"List","items":[]}` + "\n")

// WithoutSecretValues is the copy of a good manifest (data, read from
// source) that may be kept on disk as its last good copy: every Secret that
// has values of its own (data or stringData) is left out, whole, so that no
// value written inline is ever at rest in clear beside the agent's state.
// A Secret whose values all come from credentials (AnnotationCredentials)
// is kept: it holds only their names, and the values are read again.
//
// A Secret is left out whole, not kept with its values removed: a pod run
// from the copy then waits for it as for any missing object, instead of
// starting with keys missing. Pods are not touched, so each keeps the UID
// and digest it has from the manifest itself (computeUID reads the pod's
// own document). A file's other documents are kept as written; a URL's
// List whose items change is kept as JSON. data is returned as it is when
// nothing is left out.
func WithoutSecretValues(data []byte, source string) []byte {
	docs, err := documents(data)
	if err != nil {
		return nil // not a good manifest: nothing to keep
	}
	// A URL's documents after the first are not read (check), and not
	// kept: one of them may be a Secret written in clear.
	changed := len(docs) > 1 && source == SourceHTTP
	if source == SourceHTTP {
		docs = docs[:1]
	}
	var out [][]byte
	for _, d := range docs {
		doc, ok := generic(d)
		switch {
		case !ok:
			changed = true // not read as an object: nothing of it is kept
		case secretValues(doc):
			changed = true
			if source == SourceHTTP {
				out = append(out, emptyList)
			}
		case source == SourceHTTP && doc["kind"] == "List":
			items, _ := doc["items"].([]any)
			kept := make([]any, 0, len(items))
			for _, it := range items {
				if m, ok := it.(map[string]any); !ok || !secretValues(m) {
					kept = append(kept, it)
				}
			}
			if len(kept) == len(items) && !pastEnd(d) && !unreadTail(d) {
				out = append(out, d)
				continue
			}
			changed = true
			doc["items"] = kept
			js, err := encode(doc)
			if err != nil {
				return nil
			}
			out = append(out, js)
		case pastEnd(d) || unreadTail(d):
			// What follows a document's end is not read (a Secret there
			// is not used): only what was read is kept, encoded again.
			changed = true
			js, err := encode(doc)
			if err != nil {
				return nil
			}
			out = append(out, js)
		default:
			out = append(out, d)
		}
	}
	if !changed {
		return data
	}
	var b bytes.Buffer
	for i, d := range out {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(d)
		if !bytes.HasSuffix(d, []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// leftOut reports whether WithoutSecretValues leaves out or encodes again
// any of doc, read from the document data of a manifest from source: what
// its loop over the documents tells apart, for a document read as an object.
func leftOut(doc map[string]any, data []byte, source string) bool {
	if secretValues(doc) || pastEnd(data) || unreadTail(data) {
		return true
	}
	if source != SourceHTTP || doc["kind"] != "List" {
		return false
	}
	items, _ := doc["items"].([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && secretValues(m) {
			return true
		}
	}
	return false
}

// encode is doc as JSON, one line. <, > and & are written as they are, not
// as json.Marshal's six-byte escapes: a body of them would be kept six
// times its size, past MaxSize, a copy the next daemon refuses.
func encode(doc map[string]any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// pastEnd reports whether doc has a line that ends a YAML document ("...")
// or starts another ("---" or a directive such as "%YAML", after something
// of the first) with more after it: the parser reads the first document of
// doc only, and the rest, unread and unchecked, may be a Secret written in
// clear. A line is as YAML breaks them (yamlLines): the reader that splits
// a manifest into its documents knows LF only, and a "---" after a lone CR
// is not seen by it. A marker line is as lenient as "..." followed by any
// blank: one more seen than the parser sees only encodes a copy again.
func pastEnd(doc []byte) bool {
	content := false // something of a document before the line
	for next, line := range yamlLines(doc) {
		rest, end := bytes.CutPrefix(line, []byte("..."))
		start := false
		if !end {
			rest, start = bytes.CutPrefix(line, []byte("---"))
		}
		marker := len(bytes.TrimSpace(rest)) == 0 || rest[0] == ' ' || rest[0] == '\t'
		switch {
		case end && marker:
			if !onlyComments(doc[next:]) {
				return true
			}
		case start && marker:
			if content && !(onlyComments(rest) && onlyComments(doc[next:])) {
				return true
			}
			content = content || !onlyComments(rest)
		case len(line) > 0 && line[0] == '%':
			// A directive (%YAML) comes before a document's start:
			// after something of a document, it ends that document.
			if content {
				return true
			}
		default:
			if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
				content = true
			}
		}
	}
	return false
}

// unreadTail reports whether the parser may have read only the start of
// doc: a document whose root is a flow collection ({...} or [...]), or
// starts with a tag or an anchor, or is indented, ends where that node
// does, and what follows it (another JSON object, a Secret at the first
// column) is neither read nor refused.
// A document that is JSON alone is read whole; any other such document is
// kept as what was read of it, encoded again.
func unreadTail(doc []byte) bool {
	start := 0
	for next, line := range yamlLines(doc) {
		line = bytes.TrimPrefix(line, []byte("\ufeff")) // the parser skips a byte order mark
		t, marker := bytes.TrimSpace(line), false
		if rest, ok := bytes.CutPrefix(t, []byte("---")); ok && (len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t') {
			t, marker = bytes.TrimSpace(rest), true
		}
		if len(t) == 0 || t[0] == '#' || t[0] == '%' {
			start = next
			continue
		}
		if !marker && (line[0] == ' ' || line[0] == '\t') {
			// An indented root ends at the first line less indented,
			// and what follows is not read either.
			return true
		}
		switch t[0] {
		case '{', '[', '!', '&', '"', '\'', '|', '>':
			return !json.Valid(doc[start:])
		}
		return false
	}
	return false
}

// yamlLines yields each line of doc as YAML breaks them, without its
// break, and the offset of what follows it: LF, CR LF, a lone CR, NEL
// (U+0085), and the line and paragraph separators (U+2028, U+2029).
func yamlLines(doc []byte) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		start := 0
		for i := 0; i < len(doc); {
			n := 0
			switch c := doc[i]; {
			case c == '\n':
				n = 1
			case c == '\r':
				n = 1
				if i+1 < len(doc) && doc[i+1] == '\n' {
					n = 2
				}
			case c == 0xC2 && i+1 < len(doc) && doc[i+1] == 0x85:
				n = 2
			case c == 0xE2 && i+2 < len(doc) && doc[i+1] == 0x80 && (doc[i+2] == 0xA8 || doc[i+2] == 0xA9):
				n = 3
			}
			if n == 0 {
				i++
				continue
			}
			if !yield(i+n, doc[start:i]) {
				return
			}
			i += n
			start = i
		}
		if start < len(doc) {
			yield(len(doc), doc[start:])
		}
	}
}

// generic reads one document as an object; ok is false when it is not one.
// Two equal keys: the last one, as check reads them. Numbers are kept as
// written (decodeGeneric), not as float64: a List encoded again must give
// the same pods, UIDs and quantities included.
func generic(doc []byte) (map[string]any, bool) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, false
	}
	v, err := decodeGeneric(js)
	if err != nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok
}

// secretValues reports whether doc is a Secret with values of its own.
func secretValues(doc map[string]any) bool {
	if doc["kind"] != "Secret" {
		return false
	}
	for _, f := range []string{"data", "stringData"} {
		if m, ok := doc[f].(map[string]any); ok && len(m) == 0 {
			continue
		}
		if doc[f] != nil {
			return true
		}
	}
	return false
}
