package manifest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	goyaml "go.yaml.in/yaml/v2"
)

// parserDocuments counts the documents of data that hold something, as the
// YAML parser reads a stream of them; bad says it stopped on an error.
func parserDocuments(data []byte) (n int, bad bool) {
	dec := goyaml.NewDecoder(bytes.NewReader(data))
	for range 1000 {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return n, false
		}
		if err != nil {
			return n, true
		}
		if v != nil {
			n++
		}
	}
	return n, true
}

// A manifest kept as written is one whose every byte the parse read: the
// YAML parser, reading it as a stream, finds the documents check read and
// nothing more (a document check did not read may be a Secret in clear).
func FuzzKeptAsWrittenIsRead(f *testing.F) {
	seeds(f)
	for _, c := range keepCases() {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, source := range []string{SourceFile, SourceHTTP, SourceBundle} {
			p := Check(data, source, "/m/web.yaml", "node1")
			if p.Err() != nil || !bytes.Equal(p.WithoutSecretValues(data, source), data) {
				continue
			}
			docs, err := documents(data)
			if err != nil {
				t.Fatalf("%s, %q: kept, but documents fails: %v", source, data, err)
			}
			if n, bad := parserDocuments(data); bad || n != len(docs) || source == SourceHTTP && n != 1 {
				t.Fatalf("%s, %q: kept as written, %d documents read, the parser finds %d (stopped on an error: %v)", source, data, len(docs), n, bad)
			}
		}
	})
}
