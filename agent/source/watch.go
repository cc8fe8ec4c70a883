package source

import (
	"path/filepath"
	"slices"

	"github.com/fsnotify/fsnotify"
)

// watchDir is one directory the source watches and the names in it whose
// events matter; all of them when any is set.
type watchDir struct {
	any   bool
	names map[string]bool
	inode inode // of the directory the watch was added on
}

// maxWatches bounds the directories watched for one source: the manifest
// directory, its parents' entries that lead to it, and the directories
// symlinked manifests lead through. Beyond it, the periodic relist still
// sees every change.
const maxWatches = 256

// wantWatches returns the directories whose entries decide the pod set: each
// directory holding a symlink on the way to the manifest path, and the
// directory holding the path itself (so that a symlink swapped with `ln -sfn`,
// a directory deleted and made again, or one that does not exist yet are seen
// at once); the manifest directory, every name in it; and for each manifest
// that is a symlink, the entries on its way to the file it leads to (a
// versioned directory, a `..data` link). links are the manifest paths that
// are symlinks.
func (f *File) wantWatches(links []string) map[string]*watchDir {
	want := map[string]*watchDir{}
	add := func(dir, name string) {
		if len(want) >= maxWatches && want[dir] == nil {
			return
		}
		w := want[dir]
		if w == nil {
			w = &watchDir{names: map[string]bool{}}
			want[dir] = w
		}
		if name == "" {
			w.any = true
		} else {
			w.names[name] = true
		}
	}
	follow := func(r resolution) {
		for _, l := range r.links {
			add(l.dir, l.name)
		}
		if r.real == "" {
			add(r.missing.dir, r.missing.name)
		} else if r.real != "/" {
			add(filepath.Dir(r.real), filepath.Base(r.real))
		}
	}
	r := resolve(f.abs)
	follow(r)
	if r.real != "" && f.isDir {
		add(r.real, "")
	}
	for _, l := range links {
		follow(resolve(l))
	}
	return want
}

// watch makes the watcher's set of directories what wantWatches says, adding
// back any whose directory was replaced since. It reports whether it added a
// watch: what changed there before it did was seen by no one.
func (f *File) watch(w *fsnotify.Watcher, links []string) (added bool) {
	if w == nil {
		return false
	}
	want := f.wantWatches(links)
	have := w.WatchList()
	for dir := range f.watches {
		if want[dir] == nil {
			_ = w.Remove(dir) // it may be gone already
			delete(f.watches, dir)
		}
	}
	for dir, wd := range want {
		ino, err := inodeOf(dir)
		if err != nil {
			delete(f.watches, dir) // gone since: an event or the next list brings it back
			continue
		}
		old := f.watches[dir]
		if old != nil && old.inode == ino && slices.Contains(have, dir) {
			old.any, old.names = wd.any, wd.names
			continue
		}
		if old != nil {
			_ = w.Remove(dir)
		}
		if err := w.Add(dir); err != nil {
			delete(f.watches, dir)
			f.noteOnce(dir, "watch", "cannot watch a directory; relisting periodically", "dir", dir, "err", err)
			continue
		}
		if f.notes[dir] == "watch" {
			delete(f.notes, dir)
		}
		wd.inode = ino
		f.watches[dir] = wd
		added = true
	}
	return added
}

// relevant reports whether ev may change the pod set: an event on a watched
// directory itself, or on a name in it that matters.
func (f *File) relevant(ev fsnotify.Event) bool {
	if f.watches[ev.Name] != nil {
		return true
	}
	w := f.watches[filepath.Dir(ev.Name)]
	return w != nil && (w.any || w.names[filepath.Base(ev.Name)])
}

// unwatchAll forgets every watch, so that the next watch adds them again.
func (f *File) unwatchAll(w *fsnotify.Watcher) {
	for dir := range f.watches {
		_ = w.Remove(dir)
	}
	clear(f.watches)
}
