package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
)

// answer is one try of one batch.
type answer struct {
	Sent, Done time.Time
	// Status is the HTTP status, 0 when the request failed before one
	// came (Err says why).
	Status int
	Err    error
	// Accepted is the events a 202 accepted.
	Accepted int64
}

// load says what drive sends.
type load struct {
	URL, Key string
	Tmpl     template
	Conns    int
	// FirstWorker numbers the connections from it (batch ids hold it).
	FirstWorker int
	Duration    time.Duration
	// Retry resends a batch not answered 202 (same id, after RetryPause)
	// until it is, as a client following the specification does; without
	// it each batch is sent once.
	Retry      bool
	RetryPause time.Duration
}

// drive sends batches over l.Conns connections until l.Duration has
// passed, calling onAnswer (from the worker's goroutine) for every try.
// A batch being resent when the time is up is resent until it is answered
// 202, for at most a minute more.
func drive(l load, onAnswer func(worker int, a answer)) {
	tr := &http.Transport{MaxIdleConnsPerHost: l.Conns, MaxConnsPerHost: l.Conns}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	stop := time.Now().Add(l.Duration)
	var wg sync.WaitGroup
	for w := 0; w < l.Conns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, 0, len(l.Tmpl.body))
			for seq := uint64(0); time.Now().Before(stop); seq++ {
				buf = l.Tmpl.stamp(buf, uint64(l.FirstWorker+w), seq)
				for try := 0; ; try++ {
					a := send(client, l, buf)
					onAnswer(w, a)
					if a.Status == http.StatusAccepted || !l.Retry || time.Since(stop) > time.Minute {
						break
					}
					time.Sleep(l.RetryPause)
				}
			}
		}(w)
	}
	wg.Wait()
}

// send posts one batch.
func send(client *http.Client, l load, body []byte) answer {
	req, err := http.NewRequest("POST", l.URL+"/v1/batch", bytes.NewReader(body))
	if err != nil {
		return answer{Sent: time.Now(), Done: time.Now(), Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+l.Key)
	req.Header.Set("Content-Type", "application/json")
	a := answer{Sent: time.Now()}
	resp, err := client.Do(req)
	if err != nil {
		a.Done, a.Err = time.Now(), err
		return a
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a.Done, a.Status = time.Now(), resp.StatusCode
	if err != nil {
		a.Status, a.Err = 0, err
		return a
	}
	if a.Status == http.StatusAccepted {
		var r struct{ Accepted int64 }
		if err := json.Unmarshal(out, &r); err != nil {
			a.Status, a.Err = 0, err
		}
		a.Accepted = r.Accepted
	}
	return a
}
