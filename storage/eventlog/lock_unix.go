//go:build unix

package eventlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// dirLock holds an exclusive flock(2) on a file in the log directory, so
// that two processes never run an embedded server on the same files. The
// kernel releases it when the process dies, however it dies.
type dirLock struct{ f *os.File }

const lockFile = "mf-log.lock"

func lockDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create log directory %q: %w", dir, err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file %q: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %q is locked; stop the other mf process or give this one its own --data", ErrDirLocked, dir)
		}
		return nil, fmt.Errorf("cannot lock %q: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) unlock() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("cannot release log directory lock: %w", err)
	}
	return nil
}
