package conformance

import (
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the table of intended differences in docs/kubelet-differences.md")

const docsFile = "../../docs/kubelet-differences.md"

// The table in docs/kubelet-differences.md is the one intended.txt makes,
// and every line of intended.txt names a paragraph there.
func TestDocTable(t *testing.T) {
	intended, err := ParseIntended("intended.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	docs := string(b)
	if err := CheckParagraphs(intended, docs); err != nil {
		t.Error(err)
	}
	want, err := WithTable(docs, Table(intended))
	if err != nil {
		t.Fatal(err)
	}
	if want == docs {
		return
	}
	if *update {
		if err := os.WriteFile(docsFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the table of intended status differences in kubelet-differences.md is not intended.txt's: go test ./tests/conformance -run TestDocTable -update")
}

func fields(t *testing.T, js string) []Field {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	return Flatten("", v)
}

// Lists are keyed by their elements' type or name, and what differs between
// any two runs is normalised; only real differences remain, each explained
// by the first intended line whose globs match it.
func TestCompare(t *testing.T) {
	kubelet := Normalise(fields(t, `{"metadata":{"uid":"k1","annotations":{"kubernetes.io/config.hash":"k1"}},
		"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-12-01T02:30:57Z"}],
		"containerStatuses":[{"name":"b","containerID":"containerd://0b13e2","imageID":"sha256:`+strings.Repeat("a", 64)+`","ready":true},
		{"name":"a","ready":false}]}}`), "k1")
	ours := Normalise(fields(t, `{"metadata":{"uid":"s9","annotations":{"kubernetes.io/config.hash":"s9"}},
		"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-12-01T02:31:00.5Z"}],
		"containerStatuses":[{"name":"a","ready":true},
		{"name":"b","containerID":"staticpodd://77aa","imageID":"sha256:`+strings.Repeat("b", 64)+`","ready":true,"stopSignal":"SIGTERM"}]}}`), "s9")
	ds := Compare("web", kubelet, ours)
	var got []string
	for _, d := range ds {
		got = append(got, d.String())
	}
	want := []string{
		`web: .status.containerStatuses[a].ready: kubelet false, staticpodd true`,
		`web: .status.containerStatuses[b].containerID: kubelet "containerd://<id>", staticpodd "staticpodd://<id>"`,
		`web: .status.containerStatuses[b].stopSignal: kubelet <absent>, staticpodd "SIGTERM"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	file := t.TempDir() + "/intended.txt"
	if err := os.WriteFile(file, []byte("# comment\n*\t.status.*.containerID\tIDs.\nweb\t.status.*ontainerStatuses[*].stopSignal\tSignals.\nother\t*\tAll.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	intended, err := ParseIntended(file)
	if err != nil {
		t.Fatal(err)
	}
	Explain(ds, intended)
	if ds[0].Explained != nil || ds[1].Explained != intended[0] || ds[2].Explained != intended[1] || intended[2].Used != 0 {
		t.Errorf("explained: %v %v %v", ds[0].Explained, ds[1].Explained, ds[2].Explained)
	}
	if err := CheckParagraphs(intended, "**IDs.** and **Signals.**"); err == nil || !strings.Contains(err.Error(), "line 4: no paragraph **All.**") {
		t.Errorf("CheckParagraphs = %v, want line 4 missing", err)
	}
	if err := os.WriteFile(file, []byte("*\tonly two columns\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseIntended(file); err == nil || !strings.Contains(err.Error(), ":1: want pod glob") {
		t.Errorf("ParseIntended of a bad line = %v", err)
	}
}
