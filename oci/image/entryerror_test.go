package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// TestUnpackEntryErrorBounded: a layer decides its entries' names, up to the
// MiB a tar header holds, and an entry's error quotes its name, often
// twice. The error the pull or the import folder logs and keeps is cut.
func TestUnpackEntryErrorBounded(t *testing.T) {
	long := strings.Repeat("n", 500<<10)
	for name, es := range map[string][]entry{
		"name":     {{name: long, body: "x"}},
		"hardlink": {{name: "h", typ: tar.TypeLink, link: long}},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := unpack(context.Background(), bytes.NewReader(layerTar(t, es)), t.TempDir(), nil)
			if err == nil {
				t.Fatal("unpacked")
			}
			if msg := err.Error(); len(msg) > podspec.MaxOutput || !strings.Contains(msg, "nnnn") {
				t.Errorf("error of %d bytes, want at most %d quoting the name: %.200s", len(msg), podspec.MaxOutput, msg)
			}
			if name == "name" && !errors.Is(err, syscall.ENAMETOOLONG) {
				t.Errorf("error %.200s does not wrap ENAMETOOLONG", err)
			}
		})
	}
}
