//go:build unix

package eventlog

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
)

// crashChildEnv makes the test binary a publisher that a test kills (see
// TestMain and TestCrashKeepsAckedPublishes). Its value is the log
// directory.
const crashChildEnv = "MF_EVENTLOG_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	os.Exit(m.Run())
}

// crashPayload is the deterministic 64 KiB body of the crash test's message id.
func crashPayload(id string) []byte {
	var b bytes.Buffer
	block := sha256.Sum256([]byte(id))
	for b.Len() < 64<<10 {
		b.Write(block[:])
		block = sha256.Sum256(block[:])
	}
	return b.Bytes()
}

// crashChild publishes to dir's log until it is killed, printing
// "ACK <id> <seq>" after each PubAck.
func crashChild(dir string) int {
	ctx := context.Background()
	l, err := Open(ctx, testConfig(dir), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 2
	}
	pub := l.Publisher()
	for i := 0; ; i++ {
		id := fmt.Sprintf("batch-%06d", i)
		msg := message.NewMessage(id, crashPayload(id))
		msg.Metadata.Set("project", "crash")
		r, err := pub.PublishOnce(ctx, "batches.crash", id, msg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			return 3
		}
		// One write per line: the parent never sees half a line.
		if _, err := fmt.Fprintf(os.Stdout, "ACK %s %d\n", id, r.Seq); err != nil {
			return 4
		}
	}
}

// TestCrashKeepsAckedPublishes runs a publisher in a child process, kills it
// with SIGKILL while it is publishing, and checks that every message whose
// PubAck the child reported is in the log after a restart, intact, and still
// recognized as a duplicate by its dedupe id.
func TestCrashKeepsAckedPublishes(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start the child: %v", err)
	}
	acked := map[string]uint64{}
	killAfter := 40
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ACK" {
			t.Fatalf("child wrote %q", sc.Text())
		}
		seq, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			t.Fatalf("child wrote %q", sc.Text())
		}
		acked[f[1]] = seq
		if len(acked) == killAfter {
			// The child is still publishing: kill it mid-stream.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("cannot kill the child: %v", err)
			}
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL; stderr:\n%s", err, stderr.String())
	}
	if len(acked) < killAfter {
		t.Fatalf("child acked only %d messages before it died; stderr:\n%s", len(acked), stderr.String())
	}

	l := openLog(t, testConfig(dir))
	ctx := context.Background()
	pub := l.Publisher()
	last, err := l.LastSeq(ctx, "batches")
	if err != nil {
		t.Fatal(err)
	}
	for id, seq := range acked {
		if seq > last {
			t.Fatalf("acked %s at %d, but the log ends at %d", id, seq, last)
		}
		m, err := l.GetMsg(ctx, "batches.crash", seq)
		if err != nil {
			t.Fatalf("acked %s at %d is gone after the crash: %v", id, seq, err)
		}
		if m.UUID != id || !bytes.Equal(m.Payload, crashPayload(id)) || m.Metadata.Get("project") != "crash" {
			t.Fatalf("message %d after the crash: uuid %q, %d bytes, metadata %v; want %s intact", seq, m.UUID, len(m.Payload), m.Metadata, id)
		}
		r, err := pub.PublishOnce(ctx, "batches.crash", id, message.NewMessage(id, []byte("resent")))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Duplicate || r.Seq != seq {
			t.Fatalf("resending %s after the crash: %+v, want a duplicate of %d", id, r, seq)
		}
	}
	t.Logf("%d acked messages survived SIGKILL; the log holds %d", len(acked), last)
}
