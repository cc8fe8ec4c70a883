package source

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/manifest"
)

// The save file is one header line naming the URL, then the body as served
// but without the values of its Secrets (manifest.WithoutSecretValues):
// those are never at rest in clear. It is at most manifest.MaxSize plus the header: only a body that parsed is
// saved, and no body over MaxSize does.
const saveMagic = "staticpodd manifest-url v1 "

// maxSaveHeader bounds the header line when reading a save file back.
const maxSaveHeader = 64 << 10

func saveHeader(origin string) string { return saveMagic + origin + "\n" }

// load makes the set the last daemon saved the good set, when it was saved
// for the same URL and is still valid. Nothing is sent until the first poll.
func (s *URL) load() {
	if s.cfg.SaveFile == "" {
		return
	}
	if b, err := readAtMost(s.bundleFile(), maxSaveHeader); err == nil {
		if header, digest, ok := bytes.Cut(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")); ok && string(header)+"\n" == saveHeader(s.origin) {
			s.bundle = string(digest)
		}
	}
	data, err := readAtMost(s.cfg.SaveFile, manifest.MaxSize+maxSaveHeader)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		s.logger.Warn("cannot read the saved set of the manifest URL; not using it", "file", s.cfg.SaveFile, "err", err)
		return
	}
	header, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok || !bytes.HasPrefix(header, []byte(saveMagic)) {
		s.logger.Warn("the saved set of the manifest URL is not a save file; not using it", "file", s.cfg.SaveFile)
		return
	}
	if string(header)+"\n" != saveHeader(s.origin) {
		s.logger.Info("the saved set is of another manifest URL; not using it", "file", s.cfg.SaveFile,
			"savedFor", string(bytes.TrimPrefix(header, []byte(saveMagic))))
		return
	}
	// Saved by an older daemon, the body may hold Secrets' values: they
	// are not used, and it is saved again without them.
	if keep := manifest.WithoutSecretValues(body, manifest.SourceHTTP); !bytes.Equal(keep, body) {
		body, s.unsaved = keep, keep
	}
	parsed := s.parse(body)
	if err := parsed.Err(); err != nil {
		s.logger.Warn("the saved set of the manifest URL is not valid any more; not using it", "file", s.cfg.SaveFile, "err", err)
		s.unsaved = nil
		return
	}
	// received is the sum of the saved body: a server that serves again the
	// body it was made from, Secrets with values included, sends them.
	sum := sha256.Sum256(body)
	s.good, s.received = newGoodSet(sum, parsed), sum
	s.logger.Info("loaded the last good set of the manifest URL", "file", s.cfg.SaveFile, "pods", len(s.good.pods), "objects", len(s.good.objects))
}

// save keeps the last good body, when it was not saved yet, for the next
// daemon. A failure is logged once per cause: the running set is not
// affected, and the next good body is saved.
func (s *URL) save() {
	body := s.unsaved
	s.unsaved = nil
	if s.cfg.SaveFile == "" || body == nil {
		return
	}
	keep := manifest.WithoutSecretValues(body, manifest.SourceHTTP)
	if keep == nil {
		return // not a good body; unreachable: only good ones are saved
	}
	data := append([]byte(saveHeader(s.origin)), keep...)
	if err := writeAtomic(s.cfg.SaveFile, data); err != nil {
		if err.Error() != s.saveErr {
			s.logger.Warn("cannot save the set of the manifest URL; a restart while the server is down will not find it", "err", err)
		}
		s.saveErr = err.Error()
		return
	}
	s.saveErr = ""
}

// bundleFile keeps the digest of the last bundle the URL served and was
// applied: the same one served after a restart is not applied again (it
// may have been rolled back since).
func (s *URL) bundleFile() string { return s.cfg.SaveFile + ".bundle" }

// saveBundle keeps s.bundle for the next daemon; failing, the next daemon
// applies the bundle again, which changes nothing unless it was rolled
// back.
func (s *URL) saveBundle() {
	if s.cfg.SaveFile == "" {
		return
	}
	if err := writeAtomic(s.bundleFile(), []byte(saveHeader(s.origin)+s.bundle+"\n")); err != nil {
		s.logger.Warn("cannot save the digest of the bundle applied from the manifest URL", "err", err)
	}
}

// forgetBundle removes what saveBundle kept.
func (s *URL) forgetBundle() {
	if s.cfg.SaveFile == "" {
		return
	}
	if err := os.Remove(s.bundleFile()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logger.Warn("cannot remove the digest of the bundle applied from the manifest URL", "err", err)
	}
}

// writeAtomic replaces path by data: a reader, or the next daemon after any
// crash or power cut, finds the old content or the new one, never a mix.
func writeAtomic(path string, data []byte) error {
	if err := atomicfile.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := atomicfile.Write(path, data); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}
