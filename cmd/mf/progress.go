package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressPrinter shows the progress of long work (mf replay) to a person:
// on a terminal a bar redrawn in place, with rate and ETA; otherwise (a
// pipe, a log file) one line every Every.
type progressPrinter struct {
	w     io.Writer
	tty   bool
	label string
	now   func() time.Time
	every time.Duration

	start, lastLine time.Time
	drawn           bool
	// noWrites leaves the files written out (work that writes none: an
	// upload).
	noWrites bool
}

func newProgressPrinter(w io.Writer, label string, now func() time.Time) *progressPrinter {
	return &progressPrinter{w: w, tty: isTerminal(w), label: label, now: now, every: 5 * time.Second, start: now()}
}

// written is the files written, as the end of a progress line.
func (pp *progressPrinter) written(p replayProgress) string {
	if pp.noWrites {
		return ""
	}
	return fmt.Sprintf(", %d files written (%s)", p.FilesWritten, mib(p.BytesWritten))
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update shows p.
func (pp *progressPrinter) update(p replayProgress) {
	now := pp.now()
	elapsed := now.Sub(pp.start)
	if pp.tty {
		fmt.Fprintf(pp.w, "\r\033[K%s", pp.bar(p, elapsed))
		pp.drawn = true
		return
	}
	if !pp.lastLine.IsZero() && now.Sub(pp.lastLine) < pp.every {
		return
	}
	pp.lastLine = now
	fmt.Fprintf(pp.w, "%s: %s\n", pp.label, pp.describe(p, elapsed))
}

// done shows the last progress: the full bar on a terminal, a last line
// otherwise. Once the work succeeded, what was read is the whole (the
// total is the size of the files, of which a replay reads the columns it
// needs).
func (pp *progressPrinter) done(p replayProgress, ok bool) {
	if ok {
		p.Phase, p.BytesTotal = "done", p.BytesRead
	}
	elapsed := pp.now().Sub(pp.start)
	if pp.tty {
		fmt.Fprintf(pp.w, "\r\033[K%s\n", pp.bar(p, elapsed))
		return
	}
	fmt.Fprintf(pp.w, "%s: %s\n", pp.label, pp.describe(p, elapsed))
}

// bar is one terminal line: label, bar, percentage, bytes, rate, ETA.
func (pp *progressPrinter) bar(p replayProgress, elapsed time.Duration) string {
	const width = 24
	if p.BytesTotal <= 0 {
		return fmt.Sprintf("%s %s  %s read  %s%s", pp.label, p.Phase, mib(p.BytesRead), rate(p.BytesRead, elapsed), pp.written(p))
	}
	frac := min(float64(p.BytesRead)/float64(p.BytesTotal), 1)
	n := int(frac * width)
	b := strings.Repeat("=", n)
	if n < width {
		b += ">" + strings.Repeat(" ", width-n-1)
	}
	return fmt.Sprintf("%s [%s] %3.0f%%  %s/%s  %s  ETA %s%s", pp.label, b, 100*frac,
		mib(p.BytesRead), mib(p.BytesTotal), rate(p.BytesRead, elapsed), eta(p, elapsed), strings.Replace(pp.written(p), ",", " ", 1))
}

// describe is one log line of progress.
func (pp *progressPrinter) describe(p replayProgress, elapsed time.Duration) string {
	if p.BytesTotal <= 0 {
		return fmt.Sprintf("%s, %s read (%s)%s, %s elapsed", p.Phase, mib(p.BytesRead), rate(p.BytesRead, elapsed), pp.written(p), elapsed.Round(time.Second))
	}
	return fmt.Sprintf("%s, %.0f%% (%s of %s, %s, ETA %s)%s, %s elapsed", p.Phase, 100*min(float64(p.BytesRead)/float64(p.BytesTotal), 1),
		mib(p.BytesRead), mib(p.BytesTotal), rate(p.BytesRead, elapsed), eta(p, elapsed), pp.written(p), elapsed.Round(time.Second))
}

// mib writes a size in KiB, MiB or GiB, whichever reads best.
func mib(n int64) string {
	switch f := float64(n); {
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	default:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	}
}

func rate(n int64, elapsed time.Duration) string {
	if elapsed <= 0 {
		return "-/s"
	}
	return mib(int64(float64(n)/elapsed.Seconds())) + "/s"
}

// eta is the time left to read the rest at the rate so far; "-" before
// anything was read, "0s" once all is read (the writes follow).
func eta(p replayProgress, elapsed time.Duration) string {
	if p.BytesRead <= 0 || elapsed <= 0 {
		return "-"
	}
	left := p.BytesTotal - p.BytesRead
	if left <= 0 {
		return "0s"
	}
	return (time.Duration(float64(elapsed) * float64(left) / float64(p.BytesRead))).Round(time.Second).String()
}
