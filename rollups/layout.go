package rollups

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Object layout under the configured prefix (docs/rollups.md):
//
//	<prefix>/<project>/manifest.json                          live manifest
//	<prefix>/<project>/staging/<generation id>.json           staged generations
//	<prefix>/<project>/manifests/<table>/<object id>.json      sub-manifests
//	<prefix>/<project>/data/<table>/<partition>/<file id>.parquet
const (
	manifestObject = "manifest.json"
	stagingDir     = "staging"
	partsDir       = "manifests"
	dataDir        = "data"
	parquetExt     = ".parquet"
	manifestExt    = ".json"
)

var (
	projectRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)
	labelRE      = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	fileIDRE     = regexp.MustCompile(`^[0-9a-f]{12}-[0-9a-f]{20}$`)
	generationRE = fileIDRE
)

// layout builds the keys of the objects of one store.
type layout struct {
	prefix string // no trailing '/'
}

func (l layout) project(p string) string       { return l.prefix + "/" + p + "/" }
func (l layout) manifest(p string) string      { return l.project(p) + manifestObject }
func (l layout) stagingPrefix(p string) string { return l.project(p) + stagingDir + "/" }
func (l layout) staging(p, id string) string   { return l.stagingPrefix(p) + id + manifestExt }
func (l layout) dataPrefix(p string) string    { return l.project(p) + dataDir + "/" }
func (l layout) partsPrefix(p string) string   { return l.project(p) + partsDir + "/" }
func (l layout) parts(p, table, object string) string {
	return l.partsPrefix(p) + table + "/" + object
}
func (l layout) file(p string, f FileRef) string {
	return l.dataPrefix(p) + f.Table + "/" + f.Partition + "/" + f.Name
}

// target returns the key of the manifest a target names.
func (l layout) target(t Target) string {
	if t.Staging == "" {
		return l.manifest(t.Project)
	}
	return l.staging(t.Project, t.Staging)
}

// parseFileKey reads the file reference of a data object key of project
// p; ok is false for keys that are not data files.
func (l layout) parseFileKey(p, k string) (FileRef, bool) {
	rest, ok := strings.CutPrefix(k, l.dataPrefix(p))
	if !ok {
		return FileRef{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || !tableNameRE.MatchString(parts[0]) || validatePartition(parts[1]) != nil || !validFileName(parts[2]) {
		return FileRef{}, false
	}
	return FileRef{Table: parts[0], Partition: parts[1], Name: parts[2]}, true
}

// parsePartsKey reads the table and object name of a sub-manifest key of
// project p; ok is false for keys that are not sub-manifests.
func (l layout) parsePartsKey(p, k string) (table, object string, ok bool) {
	rest, ok := strings.CutPrefix(k, l.partsPrefix(p))
	if !ok {
		return "", "", false
	}
	table, object, ok = strings.Cut(rest, "/")
	if !ok || !tableNameRE.MatchString(table) || !validPartsObject(object) {
		return "", "", false
	}
	return table, object, true
}

// validateProject checks a project id: 1 to 128 ASCII letters, digits,
// '-' and '_', starting with a letter or digit (a UUID is one).
func validateProject(p string) error {
	if !projectRE.MatchString(p) {
		return fmt.Errorf("%w: project id %q must be 1 to 128 ASCII letters, digits, '-' or '_'", ErrInvalidName, p)
	}
	return nil
}

// validatePartition checks a partition: a day YYYY-MM-DD, or a label of
// 1 to 64 lower-case letters, digits, '-' and '_' starting with a letter.
func validatePartition(s string) error {
	if isDay(s) {
		return nil
	}
	if len(s) == 10 && s[4] == '-' && s[7] == '-' {
		return fmt.Errorf("%w: partition %q is not a valid day YYYY-MM-DD", ErrInvalidName, s)
	}
	if !labelRE.MatchString(s) {
		return fmt.Errorf("%w: partition %q must be a day YYYY-MM-DD or a label of 1 to 64 lower-case letters, digits, '-' or '_' starting with a letter", ErrInvalidName, s)
	}
	return nil
}

// isDay reports whether s is a valid date YYYY-MM-DD.
func isDay(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	t, err := time.Parse(time.DateOnly, s)
	return err == nil && t.Format(time.DateOnly) == s
}

// Day returns the partition of the day that t falls on in loc (the
// project's time zone): YYYY-MM-DD.
func Day(t time.Time, loc *time.Location) string {
	return t.In(loc).Format(time.DateOnly)
}

// newID returns a unique, time-ordered id: 12 hex digits of Unix
// milliseconds, '-', 20 hex digits (80 bits) of randomness.
func newID(now time.Time) string {
	var r [10]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
	ms := strconv.FormatInt(now.UnixMilli(), 16)
	return strings.Repeat("0", max(0, 12-len(ms))) + ms + "-" + hex.EncodeToString(r[:])
}

func validFileName(n string) bool {
	id, ok := strings.CutSuffix(n, parquetExt)
	return ok && fileIDRE.MatchString(id)
}

func validateGeneration(id string) error {
	if !generationRE.MatchString(id) {
		return fmt.Errorf("%w: generation id %q is not one that StartGeneration returned", ErrInvalidName, id)
	}
	return nil
}

// validateCheckpointName checks a checkpoint name: 1 to 128 printable
// ASCII characters.
func validateCheckpointName(n string) error {
	if n == "" || len(n) > 128 {
		return fmt.Errorf("%w: checkpoint name %q must be 1 to 128 characters", ErrInvalidName, n)
	}
	for i := 0; i < len(n); i++ {
		if n[i] < 0x21 || n[i] > 0x7e {
			return fmt.Errorf("%w: checkpoint name %q must be printable ASCII without spaces", ErrInvalidName, n)
		}
	}
	return nil
}
