package filestamp

import (
	"io/fs"
	"syscall"
	"time"
)

func stampOf(fi fs.FileInfo) Stamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Stamp{}
	}
	return Stamp{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: time.Unix(st.Mtim.Unix()), ctime: time.Unix(st.Ctim.Unix()),
		ok: true,
	}
}
