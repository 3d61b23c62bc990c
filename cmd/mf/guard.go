package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// panicGuard turns a panic in a request's handlers into a 500 answer for
// that request alone: the answer has the listener's own error shape (the
// app's error handler renders it), the panic is logged with its stack and
// counted (mf_http_panics_total), and the process goes on. Without it a
// panic in any handler ends the whole process, every role with it.
type panicGuard struct {
	logger *slog.Logger
	panics *prometheus.CounterVec
}

// errPanicked is what a handler that panicked returns to the app's error
// handler: a plain error, which every listener answers 500.
var errPanicked = errors.New("the request's handler failed")

func newPanicGuard(reg prometheus.Registerer, logger *slog.Logger) (*panicGuard, error) {
	g := &panicGuard{logger: logger, panics: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_http_panics_total",
		Help: "Panics recovered in request handlers (each answered 500), by listener."}, []string{"listener"})}
	if err := reg.Register(g.panics); err != nil {
		return nil, err
	}
	return g, nil
}

// guard makes every route of app recover its panics. It runs once the
// app's routes are registered and before it serves. The web server's
// handler is wrapped too, for a panic outside the routes (in an error
// handler).
func (g *panicGuard) guard(listener string, app *fiber.App) {
	g.panics.WithLabelValues(listener) // the family shows 0 before the first panic
	for _, routes := range app.Stack() {
		for _, r := range routes {
			handlers := []fiber.Handler{g.recoverer(listener)}
			if faultInjection {
				handlers = append(handlers, injectPanic)
			}
			r.Handlers = append(handlers, r.Handlers...)
		}
	}
	srv := app.Server()
	next := srv.Handler
	srv.Handler = func(ctx *fasthttp.RequestCtx) {
		defer func() {
			if v := recover(); v != nil {
				g.report(listener, string(ctx.Method()), "", v)
				ctx.Response.Reset()
				ctx.SetStatusCode(fasthttp.StatusInternalServerError)
				ctx.SetContentType("application/json")
				ctx.SetBodyString(`{"message":"Internal server error"}`)
			}
		}()
		next(ctx)
	}
}

// recoverer is the first handler of every route.
func (g *panicGuard) recoverer(listener string) fiber.Handler {
	return func(c *fiber.Ctx) (err error) {
		defer func() {
			if v := recover(); v != nil {
				g.report(listener, c.Method(), c.Route().Path, v)
				err = errPanicked
			}
		}()
		return c.Next()
	}
}

// report logs a panic with its stack and counts it. The log has the
// route pattern, never the path asked (keys, ids) or the client; of the
// panic's value only what cannot carry request data: a runtime error's
// message (an index, a nil map), else the value's type.
func (g *panicGuard) report(listener, method, route string, v any) {
	g.panics.WithLabelValues(listener).Inc()
	g.logger.LogAttrs(context.Background(), slog.LevelError, "panic in a request handler; answered 500 and went on",
		slog.String("listener", listener), slog.String("method", method), slog.String("route", route),
		slog.String("panic", describePanic(v)), slog.String("stack", string(debug.Stack())))
}

func describePanic(v any) string {
	if re, ok := v.(runtime.Error); ok {
		return re.Error()
	}
	return fmt.Sprintf("a value of type %T", v)
}
