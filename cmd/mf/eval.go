package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/mfhq/mf/evaluator"
	"github.com/mfhq/mf/wasm"
)

const evalUsage = `usage: mf eval [--engine native|wasm] [--explain] < cases.jsonl

Reads one case a line on stdin, {"flag": {...}, "facts": {...}}, and writes
one result line per case on stdout, in order:

  {"variant":"b","reason":"SPLIT","rule":1,"value":{"color":"green"}}
  {"reason":"ERROR","errorCode":"NOT_READY"}

A line that is not a case answers {"reason":"ERROR","errorCode":"PARSE_ERROR"}
and the run goes on.

flags:
`

// evalMain is `mf eval`: the evaluator outside the server (operations
// contract, section 3). Exit status: 0 when every line was answered by the
// evaluator, 1 when the engine failed on some line (it still answered
// PARSE_ERROR there, so output stays one line per input line) or stdin or
// stdout failed, 2 for bad flags.
func evalMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mf eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), evalUsage)
		fs.PrintDefaults()
	}
	engine := fs.String("engine", "native", "evaluator to run: native (Go) or wasm (the WebAssembly module in wazero, as browsers run it)")
	explain := fs.Bool("explain", false, `add "explain" to each result: the rules tried, the condition that decided, the buckets`)
	if code := parseArgs(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mf eval: unexpected argument %q (cases are read from stdin)\n", fs.Arg(0))
		return 2
	}

	var eval func(dst, line []byte) ([]byte, error)
	switch *engine {
	case "native":
		eval = func(dst, line []byte) ([]byte, error) {
			return evaluator.AppendCase(dst, line, *explain), nil
		}
	case "wasm":
		cfg := wasm.DefaultConfig()
		// One caller, lines of any size: allow large inputs (memory is
		// reserved as the guest grows, not up front).
		cfg.Instances = 1
		cfg.MemoryLimitPages = 16384  // 1 GiB
		cfg.MaxInputBytes = 256 << 20 // a quarter of it
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
		e, err := wasm.New(ctx, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "mf eval: cannot start the WebAssembly evaluator: %v\n", err)
			return 1
		}
		defer e.Close(context.Background())
		if *explain {
			eval = func(dst, line []byte) ([]byte, error) { return e.ExplainCase(ctx, dst, line) }
		} else {
			eval = func(dst, line []byte) ([]byte, error) { return e.EvaluateCase(ctx, dst, line) }
		}
	default:
		fmt.Fprintf(stderr, "mf eval: --engine must be native or wasm, got %q\n", *engine)
		return 2
	}

	in := bufio.NewReaderSize(stdin, 64<<10)
	out := bufio.NewWriterSize(stdout, 64<<10)
	var line, res []byte
	code, n := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			fmt.Fprintf(stderr, "mf eval: stopped after %d lines: %v\n", n, err)
			code = 1
			break
		}
		// Flush before waiting for more input, so that a caller writing one
		// line at a time gets each answer.
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				fmt.Fprintf(stderr, "mf eval: cannot write results: %v\n", err)
				return 1
			}
		}
		var err error
		line, err = readEvalLine(in, line[:0])
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			fmt.Fprintf(stderr, "mf eval: cannot read line %d: %v\n", n+1, err)
			code = 1
			break
		}
		n++
		var evalErr error
		res, evalErr = eval(res[:0], line)
		if evalErr != nil {
			fmt.Fprintf(stderr, "mf eval: line %d: the %s engine failed: %v\n", n, *engine, evalErr)
			res = evaluator.AppendResult(res[:0], evaluator.ParseErrorResult())
			code = 1
		}
		res = append(res, '\n')
		if _, err := out.Write(res); err != nil {
			fmt.Fprintf(stderr, "mf eval: cannot write results: %v\n", err)
			return 1
		}
		if err == io.EOF {
			break
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(stderr, "mf eval: cannot write results: %v\n", err)
		return 1
	}
	return code
}

// readEvalLine appends the next line of r to buf, without its line feed. Lines
// may be of any length. At the end of input it returns io.EOF, with the
// last line when that had no line feed.
func readEvalLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		switch err {
		case nil:
			return buf[:len(buf)-1], nil
		case bufio.ErrBufferFull:
			continue
		default:
			return buf, err
		}
	}
}
