package manifest

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
)

// computeUID returns the UID of a static pod whose manifest sets none.
//
// The kubelet hashes its decoded Go struct (DeepHashObject), so a new field in
// k8s.io/api or a new default changes every UID on upgrade and restarts every
// static pod (kubernetes#116080). staticpodd hashes what the user wrote instead:
//
//	md5("host:<node>" "file:<path>" canonical)   for a file, by absolute path
//	md5("url:<url>" canonical)                   for a URL, as the kubelet does
//	md5("host:<node>" "bundle:<origin>" canonical) for a bundle's file, by
//	                                             "bundle NAME/FILE"
//
// where canonical is the manifest document decoded into generic JSON (maps,
// slices, numbers kept as written) and encoded again, which sorts object keys.
// Formatting, comments, key order and YAML-versus-JSON do not change the UID; any
// change to a value does. The digest is hex-encoded, 32 characters like the
// kubelet's.
func computeUID(doc any, source, origin, nodeName string) (string, error) {
	h := md5.New()
	switch source {
	case SourceFile:
		fmt.Fprintf(h, "host:%s", nodeName)
		fmt.Fprintf(h, "file:%s", origin)
	case SourceBundle:
		fmt.Fprintf(h, "host:%s", nodeName)
		fmt.Fprintf(h, "bundle:%s", origin)
	default:
		fmt.Fprintf(h, "url:%s", origin)
	}
	// json.Marshal's bytes, straight into the hash: Marshal would copy them
	// out of its buffer, another 10 MiB for a manifest of 10 MiB.
	if err := json.NewEncoder(noNewline{h}).Encode(doc); err != nil {
		return "", fmt.Errorf("canonical form of %s: %w", origin, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// noNewline passes on what a json.Encoder writes, all of a value in one
// Write, without the newline Encode puts after it (json.Marshal has none).
type noNewline struct{ w io.Writer }

func (n noNewline) Write(p []byte) (int, error) {
	if _, err := n.w.Write(bytes.TrimSuffix(p, []byte("\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// decodeGeneric decodes JSON into maps and slices, keeping numbers as written.
func decodeGeneric(js []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return doc, nil
}
