package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// importedFile is what the import folder remembers of a file it tried: the size and
// mtime it had, and the error if the import failed.
type importedFile struct {
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime"`
	Err     string    `json:"error,omitempty"`
	// Images are the IDs of the images it gave: kept by image garbage
	// collection while the file is in the folder.
	Images []string `json:"images,omitempty"`
}

// WatchImports imports the image archives in dir (the k3s-style auto-import folder)
// when it starts and each one that appears or changes after, until ctx ends; then it
// returns nil. A file is tried once it has gone unwritten for a second, so one still
// being copied is imported when complete. A failed file is logged once, with its
// reason, and tried again only when it changes. What was tried (name, size, mtime) is
// kept in the store, so a restart does not import the same files again. Names that
// start with "." or end in "~", ".tmp" or ".part" are ignored (copies in progress by
// rsync and editors). onImport, if not nil, gets the images of each good import.
func (s *Store) WatchImports(ctx context.Context, dir string, onImport func([]Image)) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("watch image imports in %s: %w", dir, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch image imports in %s: %w", dir, err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch image imports in %s: %w", dir, err)
	}
	iw := &importWatch{s: s, dir: dir, onImport: onImport, timers: map[string]*time.Timer{}, due: make(chan string)}
	iw.seen, err = s.readImportState()
	if err != nil {
		return err
	}
	defer iw.stopTimers()
	if err := iw.scan(ctx); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			iw.event(ctx, ev)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				return fmt.Errorf("watch image imports in %s: %w", dir, err)
			}
			if err := iw.scan(ctx); err != nil { // events were lost: look at everything
				return err
			}
		case name := <-iw.due:
			delete(iw.timers, name)
			iw.try(ctx, name)
		}
	}
}

type importWatch struct {
	s        *Store
	dir      string
	onImport func([]Image)
	seen     map[string]importedFile // by file name
	timers   map[string]*time.Timer  // quiet-period timers of files waiting to be tried
	due      chan string
}

func ignoredImport(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") ||
		strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".part")
}

func (iw *importWatch) scan(ctx context.Context) error {
	entries, err := os.ReadDir(iw.dir)
	if err != nil {
		return fmt.Errorf("watch image imports in %s: %w", iw.dir, err)
	}
	for _, e := range entries {
		if !ignoredImport(e.Name()) {
			iw.schedule(ctx, e.Name())
		}
	}
	return nil
}

func (iw *importWatch) event(ctx context.Context, ev fsnotify.Event) {
	name := filepath.Base(ev.Name)
	if ignoredImport(name) {
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		if t, ok := iw.timers[name]; ok {
			t.Stop()
			delete(iw.timers, name)
		}
		if _, ok := iw.seen[name]; ok {
			// Forget it: the same file put back later is imported again.
			delete(iw.seen, name)
			if err := iw.s.writeImportState(iw.seen); err != nil {
				iw.s.logger.Warn("cannot forget removed import file", "file", ev.Name, "err", err)
			}
		}
		return
	}
	iw.schedule(ctx, name)
}

// schedule (re)starts name's quiet period.
func (iw *importWatch) schedule(ctx context.Context, name string) {
	if t, ok := iw.timers[name]; ok {
		t.Reset(iw.s.importQuiet)
		return
	}
	iw.timers[name] = time.AfterFunc(iw.s.importQuiet, func() {
		select {
		case iw.due <- name:
		case <-ctx.Done():
		}
	})
}

func (iw *importWatch) stopTimers() {
	for _, t := range iw.timers {
		t.Stop()
	}
}

// try imports name unless it is unchanged since it was last tried.
func (iw *importWatch) try(ctx context.Context, name string) {
	p := filepath.Join(iw.dir, name)
	logger := iw.s.logger.With("file", p)
	before, err := os.Stat(p)
	if err != nil || !before.Mode().IsRegular() {
		return // gone again, or not a file
	}
	if prev, ok := iw.seen[name]; ok && prev.Size == before.Size() && prev.ModTime.Equal(before.ModTime()) {
		return
	}
	// Judged as a file of the folder, whatever a link in it points to:
	// whoever writes the folder would otherwise choose the policy's scope.
	scope := filepath.Join(archiveScope(iw.dir), name)
	imgs, err := iw.s.ImportAs(ctx, p, scope, WithProgress(logProgress(logger), importLogPeriod))
	if ctx.Err() != nil {
		return
	}
	after, serr := os.Stat(p)
	if serr != nil || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		// Written to while importing: the next write event tries it again.
		logger.Debug("image archive changed while importing; waiting for it to settle")
		return
	}
	rec := importedFile{Size: before.Size(), ModTime: before.ModTime()}
	switch {
	case errors.Is(err, policy.ErrSignatureValidationFailed):
		rec.Err = err.Error()
		logger.Warn("image import failed: refused by the image policy; retried when the file changes", "err", err)
	case err != nil:
		rec.Err = err.Error()
		logger.Warn("image import failed; retried when the file changes", "err", err)
	default:
		logger.Info("imported images", "images", refsOf(imgs))
		for _, img := range imgs {
			rec.Images = append(rec.Images, img.ID)
		}
	}
	iw.seen[name] = rec
	if err := iw.s.writeImportState(iw.seen); err != nil {
		logger.Warn("cannot remember imported file", "err", err)
	}
	if rec.Err == "" && iw.onImport != nil {
		iw.onImport(imgs)
	}
}

func refsOf(imgs []Image) []string {
	var refs []string
	for _, img := range imgs {
		if len(img.Refs) == 0 {
			refs = append(refs, img.ID)
		}
		refs = append(refs, img.Refs...)
	}
	return refs
}

func (s *Store) importStatePath() string { return filepath.Join(s.root, "import-state.json") }

func (s *Store) readImportState() (map[string]importedFile, error) {
	seen := map[string]importedFile{}
	b, err := os.ReadFile(s.importStatePath())
	if errors.Is(err, os.ErrNotExist) {
		return seen, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read import state: %w", err)
	}
	if err := json.Unmarshal(b, &seen); err != nil {
		return nil, fmt.Errorf("read import state %s: %w", s.importStatePath(), err)
	}
	return seen, nil
}

func (s *Store) writeImportState(seen map[string]importedFile) error {
	b, err := json.MarshalIndent(seen, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(s.importStatePath(), b)
}
