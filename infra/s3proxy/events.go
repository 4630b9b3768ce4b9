package main

// The event ring (long-polled by GET /events), held requests and per-operation counters.

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Event is one record of the ring: a request's `start` (headers received), `held` (parked by a hold rule) or
// `end` (answered, errored or dropped). start and end share request_id.
type Event struct {
	Seq            uint64            `json:"seq"`
	Type           string            `json:"type"`
	TimeMs         int64             `json:"time_ms"`
	RequestID      string            `json:"request_id"`
	Op             string            `json:"op"`
	Method         string            `json:"method"`
	Bucket         string            `json:"bucket"`
	Key            string            `json:"key"`
	SourceBucket   string            `json:"source_bucket"`
	SourceKey      string            `json:"source_key"`
	Query          map[string]string `json:"query"`
	ContentLength  int64             `json:"content_length"`  // as the client declared it; -1 unknown (chunked)
	Status         int               `json:"status"`          // end: the status sent to the client; 0 when none was
	UpstreamStatus int               `json:"upstream_status"` // end: what MinIO answered; 0 when not forwarded
	BytesIn        int64             `json:"bytes_in"`        // end: request body bytes read from the client
	BytesOut       int64             `json:"bytes_out"`       // end: response body bytes written to the client
	DurationMs     float64           `json:"duration_ms"`     // end: from headers received to answered/dropped
	Rule           string            `json:"rule"`            // the rule that acted ("" none)
	Action         string            `json:"action"`
	Phase          string            `json:"phase"`
	Outcome        string            `json:"outcome"`     // held; end: forwarded, delayed, errored, dropped, released, upstream_error, client_gone, aborted
	Release        string            `json:"release"`     // end of a held request: forward, drop or error
	ReleasedBy     string            `json:"released_by"` // api, timeout or reset
	Error          string            `json:"error"`
}

// Ring keeps the last `capacity` events; seq numbers start at 1 and never repeat within a process.
type Ring struct {
	mu       sync.Mutex
	buf      []Event
	capacity int
	last     uint64        // seq of the newest event
	notify   chan struct{} // closed and replaced on every append: wakes long-polls
	closed   chan struct{} // closed at shutdown: long-polls return at once
}

func NewRing(capacity int) *Ring {
	if capacity < 1 {
		capacity = 1
	}
	return &Ring{buf: make([]Event, 0, min(capacity, 4096)), capacity: capacity, notify: make(chan struct{}),
		closed: make(chan struct{})}
}

// Append stamps the event with the next seq and the time, and wakes every waiting reader.
func (r *Ring) Append(e Event) Event {
	r.mu.Lock()
	r.last++
	e.Seq = r.last
	e.TimeMs = time.Now().UnixMilli()
	if len(r.buf) < r.capacity {
		r.buf = append(r.buf, e)
	} else {
		r.buf[int((e.Seq-1)%uint64(r.capacity))] = e
	}
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
	return e
}

// Last is the newest seq (0: none yet).
func (r *Ring) Last() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// sinceLocked: up to `limit` events with seq > since, oldest first, and how many such events were already
// overwritten.
func (r *Ring) sinceLocked(since uint64, limit int) ([]Event, uint64) {
	if since >= r.last {
		return nil, 0
	}
	oldest := r.last - uint64(len(r.buf)) + 1
	from := since + 1
	var lost uint64
	if from < oldest {
		lost = oldest - from
		from = oldest
	}
	count := int(r.last - from + 1)
	if count > limit {
		count = limit
	}
	events := make([]Event, 0, count)
	for seq := from; seq < from+uint64(count); seq++ {
		if len(r.buf) < r.capacity {
			events = append(events, r.buf[seq-1])
		} else {
			events = append(events, r.buf[int((seq-1)%uint64(r.capacity))])
		}
	}
	return events, lost
}

// Wait returns events with seq > since as soon as there is one, or none after `wait`. next is the seq to pass
// as `since` next time; lost counts events that fell out of the ring before they were read.
func (r *Ring) Wait(ctx context.Context, since uint64, wait time.Duration, limit int) (events []Event, next uint64, lost uint64) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		events, lost = r.sinceLocked(since, limit)
		notify := r.notify
		r.mu.Unlock()
		if len(events) > 0 {
			return events, events[len(events)-1].Seq, lost
		}
		if wait <= 0 {
			return []Event{}, since, 0
		}
		select {
		case <-notify:
		case <-deadline.C:
			return []Event{}, since, 0
		case <-ctx.Done():
			return []Event{}, since, 0
		case <-r.closed:
			return []Event{}, since, 0
		}
	}
}

// Close wakes every long-poll (shutdown).
func (r *Ring) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.closed:
	default:
		close(r.closed)
	}
}

// -- held requests --------------------------------------------------------------------------------------

// Release is how a held request goes on.
type Release struct {
	Mode    string `json:"mode"`
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	By      string `json:"-"`
}

type held struct {
	id    string
	req   Request
	rule  string
	phase string
	since time.Time
	ch    chan Release // buffered: the releaser never blocks
}

// HeldView is a held request as GET /held shows it.
type HeldView struct {
	RequestID string  `json:"request_id"`
	Op        string  `json:"op"`
	Method    string  `json:"method"`
	Bucket    string  `json:"bucket"`
	Key       string  `json:"key"`
	SourceKey string  `json:"source_key"`
	Rule      string  `json:"rule"`
	Phase     string  `json:"phase"`
	HeldMs    float64 `json:"held_ms"`
}

type Holds struct {
	mu sync.Mutex
	m  map[string]*held
}

func NewHolds() *Holds { return &Holds{m: map[string]*held{}} }

func (h *Holds) park(id string, req Request, rule, phase string) *held {
	e := &held{id: id, req: req, rule: rule, phase: phase, since: time.Now(), ch: make(chan Release, 1)}
	h.mu.Lock()
	h.m[id] = e
	h.mu.Unlock()
	return e
}

// take removes a held request; false when it is gone already (released concurrently).
func (h *Holds) take(id string) (*held, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.m[id]
	if ok {
		delete(h.m, id)
	}
	return e, ok
}

// Release sends one held request on its way; false when no request with that id is held.
func (h *Holds) Release(id string, rel Release) bool {
	e, ok := h.take(id)
	if ok {
		e.ch <- rel
	}
	return ok
}

// ReleaseAll releases every held request the same way; returns how many.
func (h *Holds) ReleaseAll(rel Release) int {
	h.mu.Lock()
	all := h.m
	h.m = map[string]*held{}
	h.mu.Unlock()
	for _, e := range all {
		e.ch <- rel
	}
	return len(all)
}

func (h *Holds) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

func (h *Holds) Views() []HeldView {
	h.mu.Lock()
	views := make([]HeldView, 0, len(h.m))
	now := time.Now()
	for _, e := range h.m {
		views = append(views, HeldView{RequestID: e.id, Op: e.req.Op, Method: e.req.Method, Bucket: e.req.Bucket,
			Key: e.req.Key, SourceKey: e.req.SourceKey, Rule: e.rule, Phase: e.phase,
			HeldMs: float64(now.Sub(e.since).Microseconds()) / 1000})
	}
	h.mu.Unlock()
	sort.Slice(views, func(i, j int) bool { return views[i].HeldMs > views[j].HeldMs }) // oldest first
	return views
}

// -- counters --------------------------------------------------------------------------------------------

// Stats counts finished requests per operation and outcome.
type Stats struct {
	mu     sync.Mutex
	counts map[string]map[string]int64
}

func NewStats() *Stats { return &Stats{counts: map[string]map[string]int64{}} }

func (s *Stats) Count(op, outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts[op] == nil {
		s.counts[op] = map[string]int64{}
	}
	s.counts[op][outcome]++
}

func (s *Stats) Snapshot() map[string]map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[string]int64, len(s.counts))
	for op, outcomes := range s.counts {
		out[op] = make(map[string]int64, len(outcomes))
		for outcome, n := range outcomes {
			out[op][outcome] = n
		}
	}
	return out
}
