package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// mfVersion is mf's own version, set and bumped by the project with each
// release (a plain `go build` carries no module version, and may carry no
// VCS stamp). A release build may still override it with
// -ldflags "-X main.version=...".
const mfVersion = "0.9.0"

// version overrides mfVersion when set at build time.
var version = ""

// releaseVersion is mf's version: the one set at build time, or
// mfVersion.
func releaseVersion() string {
	if version != "" {
		return version
	}
	return mfVersion
}

// versionLine describes this build: mf's version, then what the Go build
// info holds (module version when installed by `go install ...@vX`, VCS
// revision, time and whether the tree was modified, Go version).
func versionLine(info *debug.BuildInfo, ok bool) string {
	v := releaseVersion()
	if !ok || info == nil {
		return "mf " + v
	}
	var parts []string
	if mv := info.Main.Version; mv != "" && mv != "(devel)" {
		parts = append(parts, "module "+mv)
	}
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		r := "revision " + rev
		if at != "" {
			r += " of " + at
		}
		if modified == "true" {
			r += ", modified"
		}
		parts = append(parts, r)
	}
	parts = append(parts, info.GoVersion)
	return "mf " + v + " (" + strings.Join(parts, "; ") + ")"
}

// printVersion is `mf version` and `mf --version`.
func printVersion(w io.Writer) int {
	info, ok := debug.ReadBuildInfo()
	fmt.Fprintln(w, versionLine(info, ok))
	return 0
}
