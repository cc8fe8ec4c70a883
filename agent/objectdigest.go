package agent

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
)

// digestKeyFile, in the root dir, keys the digests of objects' data that a
// pod's restart-on-change entries mix into its UID.
const digestKeyFile = "object-digest.key"

// absentDigest is objectDigest's for an object the current Set has not.
const absentDigest = "absent"

// objectDigest is a digest of the data of the object key in the current Set
// (absentDigest if it has none): what a restart-on-change entry "configmap/NAME"
// or "secret/NAME" mixes into the pod's UID. A pod's UID is shown to anyone
// who lists pods and a plain digest of a short Secret would let them try
// values against it: the digest is an HMAC with the daemon's own key, kept
// 0600 in the root dir so that a restarted daemon makes the same UIDs. Only
// reconcile's goroutine calls it.
func (a *Agent) objectDigest(key string) string {
	obj := a.objects.Load().Get(key)
	if obj == nil {
		return absentDigest
	}
	if a.onChange.digestKey == nil {
		k, err := loadDigestKey(a.cfg.Paths.RootDir)
		if err != nil {
			// The key serves this daemon: the next one's UIDs differ, and
			// the pods that name objects restart with it.
			a.logger.Warn("cannot keep the key of restart-on-change objects' digests", "err", err)
		}
		a.onChange.digestKey = k
	}
	h := hmac.New(sha256.New, a.onChange.digestKey)
	if cm := obj.ConfigMap; cm != nil {
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			writeField(h, "data", k, []byte(cm.Data[k]))
		}
		for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
			writeField(h, "binaryData", k, cm.BinaryData[k])
		}
	} else {
		for _, k := range slices.Sorted(maps.Keys(obj.Secret.Data)) {
			writeField(h, "data", k, obj.Secret.Data[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeField writes one key and value, each with its length first, so that
// no two sets of keys and values write the same bytes.
func writeField(h hash.Hash, field, key string, value []byte) {
	for _, b := range [][]byte{[]byte(field), []byte(key), value} {
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
}

// loadDigestKey reads rootDir's digest key, made the first time; with an
// error, a key for this daemon only.
func loadDigestKey(rootDir string) ([]byte, error) {
	if rootDir == "" {
		return newDigestKey(), nil // a test's agent: nothing outlives it
	}
	path := filepath.Join(rootDir, digestKeyFile)
	key, err := atomicfile.Read(path, 64)
	if err == nil && len(key) == 32 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return newDigestKey(), err
	}
	key = newDigestKey()
	return key, atomicfile.WriteMode(path, key, 0o600)
}

func newDigestKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand's Read never fails
	return key
}
