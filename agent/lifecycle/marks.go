package lifecycle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Marks remember, across daemon restarts, which containers have a postStart
// hook that has not succeeded yet: marked before the container starts,
// cleared once its hook is done, so that a daemon that dies during a hook
// leaves the next one a mark to run it again by. A container is named by its
// pod UID, name and attempt, known before it starts.
type Marks interface {
	Mark(uid, container string, attempt int) error
	Clear(uid, container string, attempt int) error
	Marked(uid, container string, attempt int) bool
}

// FileMarks keeps marks as empty files in the pod's directory, which go
// with it.
type FileMarks struct {
	File func(uid, container string, attempt int) string // where a mark lives (agent/poddir's PostStartMark)
}

func (m FileMarks) file(uid, name string, attempt int) string {
	return m.File(uid, name, attempt)
}

func (m FileMarks) Mark(uid, name string, attempt int) error {
	f := m.file(uid, name, attempt)
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return fmt.Errorf("mark postStart of container %s: %w", name, err)
	}
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		return fmt.Errorf("mark postStart of container %s: %w", name, err)
	}
	return nil
}

func (m FileMarks) Clear(uid, name string, attempt int) error {
	if err := os.Remove(m.file(uid, name, attempt)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear postStart mark of container %s: %w", name, err)
	}
	return nil
}

func (m FileMarks) Marked(uid, name string, attempt int) bool {
	_, err := os.Lstat(m.file(uid, name, attempt))
	return err == nil
}

// NoMarks remembers nothing: without a root dir, a hook cut short by a
// daemon restart is taken as done, as the kubelet does.
type NoMarks struct{}

func (NoMarks) Mark(string, string, int) error  { return nil }
func (NoMarks) Clear(string, string, int) error { return nil }
func (NoMarks) Marked(string, string, int) bool { return false }
