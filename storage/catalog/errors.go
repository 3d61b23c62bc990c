package catalog

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of the package. Callers test them with errors.Is.
var (
	// ErrInvalid is wrapped by every *ValidationError: the provisioning file
	// breaks a rule and nothing of it was applied.
	ErrInvalid = errors.New("provisioning file refused")
	// ErrConflict means an apply kept losing to concurrent applies from other
	// processes for Config.MaxApplyAttempts attempts; nothing of it was applied.
	ErrConflict = errors.New("catalog changed concurrently")
	// ErrNotFound means the named entity does not exist in the catalog.
	ErrNotFound = errors.New("not found in the catalog")
	// ErrNotSecretKey means an operation on secret keys named a source that
	// has a website key.
	ErrNotSecretKey = errors.New("source has no secret key")
	// ErrClosed is returned by operations on a closed Catalog.
	ErrClosed = errors.New("catalog closed")
	// ErrUnconfirmed means a change was published to the log but the catalog
	// did not see it come back before the deadline; it may still take effect.
	ErrUnconfirmed = errors.New("change published but not yet confirmed by the log")
)

// maxReportedFaults is how many faults a ValidationError message lists.
const maxReportedFaults = 10

// Fault is one broken rule: where in the provisioning file, and what is
// wrong. Path is a JSON path such as
// `organizations[0].projects[1].flags[2].r[0].if[0][1]`; an entity kept in
// the catalog but not named in the file is addressed by id, as in
// `organizations[id=…].projects[id=…].segments[id=…]`. Message never
// repeats a secret value (keys and tokens are never quoted).
type Fault struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (f Fault) String() string {
	if f.Path == "" {
		return f.Message
	}
	return f.Path + ": " + f.Message
}

// ValidationError is the refusal of a provisioning file: every fault found,
// in file order. Its message lists the first ten.
type ValidationError struct {
	Faults []Fault
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	n := len(e.Faults)
	fmt.Fprintf(&b, "%s: %d fault", ErrInvalid.Error(), n)
	if n != 1 {
		b.WriteByte('s')
	}
	for i, f := range e.Faults {
		if i == maxReportedFaults {
			fmt.Fprintf(&b, "; and %d more", n-maxReportedFaults)
			break
		}
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// faults collects faults while a file is checked.
type faults struct {
	list []Fault
}

func (fs *faults) add(path, format string, args ...any) {
	fs.list = append(fs.list, Fault{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (fs *faults) err() error {
	if len(fs.list) == 0 {
		return nil
	}
	return &ValidationError{Faults: fs.list}
}

// Path helpers: paths are built as strings while walking the file.

func pathField(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func pathIndex(parent string, i int) string {
	return fmt.Sprintf("%s[%d]", parent, i)
}

func pathID(parent, kind, id string) string {
	return fmt.Sprintf("%s[id=%s]", pathField(parent, kind), id)
}
