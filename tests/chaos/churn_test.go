package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// editor is one way people and tools replace a manifest.
type editor struct {
	name  string
	write func(dir, scratch, file, content string) error
}

var editors = []editor{
	{"write in place", func(dir, _, file, content string) error {
		return os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644)
	}},
	{"rename over", func(dir, scratch, file, content string) error {
		tmp := filepath.Join(scratch, "."+file+".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, filepath.Join(dir, file))
	}},
	{"mv f f~; cat > f; rm f~", func(dir, _, file, content string) error {
		f := filepath.Join(dir, file)
		if err := os.Rename(f, f+"~"); err != nil && !os.IsNotExist(err) {
			return err
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			return err
		}
		if err := os.Remove(f + "~"); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}},
	{"sed -i", func(dir, _, file, content string) error {
		// sed -i writes ./sedXXXXXX beside the file, then renames it over.
		tmp := filepath.Join(dir, fmt.Sprintf("sed%06d", rand.IntN(1e6)))
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, filepath.Join(dir, file))
	}},
	{"symlink swap", func(dir, scratch, file, content string) error {
		// The file is a symlink to a versioned file elsewhere; a new
		// symlink is renamed over it (Kubernetes' ConfigMap volumes do this).
		target := filepath.Join(scratch, fmt.Sprintf("%s.%d", file, rand.Int64()))
		if err := os.WriteFile(target, []byte(content), 0o644); err != nil {
			return err
		}
		link := filepath.Join(dir, "..link-"+file)
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return err
		}
		return os.Rename(link, filepath.Join(dir, file))
	}},
}
