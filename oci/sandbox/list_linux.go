//go:build linux && cgo

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Any reports whether at least one sandbox is listed (List would return one),
// reading no more than it needs: the check after each removal, which a node
// removing all its pods made once per pod over every sandbox left.
func (m *Manager) Any(ctx context.Context) (bool, error) {
	d, err := os.Open(filepath.Join(m.cfg.RunDir, Dir))
	if err != nil {
		return false, fmt.Errorf("list sandboxes: %w", err)
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(32)
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(m.cfg.RunDir, Dir, name, recordFile)); err == nil {
				return true, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("list sandboxes: %w", err)
		}
	}
}

// List returns the UIDs of the pods that have a sandbox.
func (m *Manager) List(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(m.cfg.RunDir, Dir))
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var uids []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(m.cfg.RunDir, Dir, e.Name(), recordFile)); err == nil {
			uids = append(uids, e.Name())
		}
	}
	return uids, nil
}
