package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseArgs parses a command's flags. Asked for help (-h, -help, --help),
// it prints the command's usage on stdout and returns 0; a flag it does not
// know is named on stderr with the nearest one it knows, and it returns 2.
// It returns -1 when the command goes on.
func parseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(out)
		return 0
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		var known []string
		fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
		// The flag package's own words, which scripts may look for, and
		// the nearest flag.
		if near := nearest(name, known); near != "" {
			msg += "; did you mean --" + near + "?"
		}
	}
	fmt.Fprintf(stderr, "%s: %s\nRun '%s -h' for its flags.\n", fs.Name(), msg, fs.Name())
	return 2
}

// nearest returns the candidate closest to s by edit distance, when it is
// close enough to be a likely typo ("" otherwise).
func nearest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(s, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(s)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
