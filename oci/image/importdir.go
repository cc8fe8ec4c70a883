package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ImportDir imports now, once, the archives in dir that WatchImports would
// import when it starts (new, or changed since they were last tried), and
// remembers them the same way, so that a watch started later does not import
// them again. It waits for no quiet period: it is for run --once, which
// starts pods right after, on a first boot whose images were put in the
// import folder beforehand. A file that fails is logged and left; only a dir
// or state it cannot read is an error.
func (s *Store) ImportDir(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("import images from %s: %w", dir, err)
	}
	iw := &importWatch{s: s, dir: dir}
	if iw.seen, err = s.readImportState(); err != nil {
		return err
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !ignoredImport(e.Name()) {
			iw.try(ctx, e.Name())
		}
	}
	return nil
}
