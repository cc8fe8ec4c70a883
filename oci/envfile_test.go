package oci

import (
	"errors"
	"strings"
	"testing"
)

// The kubelet's envutil.ParseEnv grammar, case by case.
func TestParseEnvFile(t *testing.T) {
	tests := []struct {
		name, file, key, want, err string
	}{
		{name: "simple", file: "A='1'\nB='2'\n", key: "B", want: "2"},
		{name: "missing key", file: "A='1'\n", key: "B", want: ""},
		{name: "comments and blanks", file: "# c\n\n  \t\n  A='x' # after\n", key: "A", want: "x"},
		{name: "literal", file: `A='$HOME "q" \n'`, key: "A", want: `$HOME "q" \n`},
		{name: "multi-line", file: "A='one\ntwo'\nB='3'", key: "A", want: "one\ntwo"},
		{name: "space after =", file: "A= 'x'\n", key: "A", want: ""},
		{name: "first wins", file: "A='1'\nA='2'\n", key: "A", want: "1"},
		{name: "no =", file: "A\n", key: "A", err: "line 1: missing '='"},
		{name: "space before =", file: "A ='1'\n", key: "A", err: "whitespace before '='"},
		{name: "unquoted", file: "A=1\n", key: "A", err: "single quotes"},
		{name: "unclosed", file: "B='1'\nA='1\n", key: "A", err: "line 2: unclosed single quote"},
		{name: "trailing junk", file: "A='1' x\n", key: "A", err: "after closing quote"},
		{name: "bad line after the key", file: "A='1'\nnonsense\n", key: "A", want: "1"},
		{name: "line too long", file: "A='" + strings.Repeat("x", 70<<10) + "'\n", key: "A", err: "token too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseEnvFile(strings.NewReader(tt.file), tt.key)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

// A container's file past maxEnvFileSize is refused, not read to its end,
// even when it is all comments.
func TestParseEnvFileBounded(t *testing.T) {
	line := "# " + strings.Repeat("x", 1000) + "\n"
	big := strings.Repeat(line, maxEnvFileSize/len(line)+2) + "A='1'\n"
	if _, err := parseEnvFile(strings.NewReader(big), "A"); !errors.Is(err, errEnvFileTooLarge) {
		t.Fatalf("err %v, want %v", err, errEnvFileTooLarge)
	}
}
