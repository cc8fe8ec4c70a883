package manifest

import (
	"path/filepath"
	"strings"
)

// backupSuffixes mark files that package managers and editors leave next to a
// manifest. The kubelet reads them as manifests and then fights over the duplicate
// pod (kubernetes#136962); staticpodd ignores them and says so.
var backupSuffixes = []string{".bak", ".backup", ".orig", ".swp", ".swo", "~"}

// backupInfixes are package managers' leftovers: foo.yaml.dpkg-old,
// foo.yaml.dpkg-dist, foo.yaml.rpmnew, foo.yaml.rpmsave, ...
var backupInfixes = []string{".dpkg-", ".rpm"}

// Skip reports whether the file name is not a manifest. Dot-files are skipped
// silently, as the kubelet does; backups and editor leftovers are skipped with a
// warning (warn is true).
func Skip(name string) (skip, warn bool) {
	base := filepath.Base(name)
	if strings.HasPrefix(base, ".") {
		return true, false
	}
	for _, s := range backupSuffixes {
		if strings.HasSuffix(base, s) {
			return true, true
		}
	}
	for _, s := range backupInfixes {
		if strings.Contains(base, s) {
			return true, true
		}
	}
	return false, false
}
