package ws

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	sockets       prometheus.Gauge
	subscriptions prometheus.Gauge
	frames        prometheus.Counter
	events        prometheus.Counter
	bytes         prometheus.Counter
	resets        *prometheus.CounterVec
	closes        *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	clientErrors  *prometheus.CounterVec
	evicted       prometheus.Counter
}

// Close reasons counted by kubegate_ws_closes_total.
const (
	closePeer         = "peer"          // the client closed or the connection broke
	closeShutdown     = "shutdown"      // 1001
	closeTooBig       = "too_big"       // 1009
	closeWriteTimeout = "write_timeout" // a write blocked past WriteTimeout
	closePongTimeout  = "pong_timeout"  // no pong within PongTimeout
	closeSlowConsumer = "slow_consumer" // 4001
	closeFlood        = "flood"         // requests sent, answers not read
	closeEvicted      = "evicted"       // 1013: given up to make room for another client's socket
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sockets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubegate_ws_sockets",
			Help: "Open WebSocket connections.",
		}),
		subscriptions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubegate_ws_subscriptions",
			Help: "Active and pending WebSocket subscriptions.",
		}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubegate_ws_messages_sent_total",
			Help: "WebSocket messages sent (a batch counts once).",
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubegate_ws_frames_sent_total",
			Help: "Protocol frames sent, counting each frame inside a batch.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubegate_ws_bytes_sent_total",
			Help: "Payload bytes of WebSocket messages sent.",
		}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_ws_resets_total",
			Help: "RESET frames sent, by reason (Overflow, Expired, Reauthorized).",
		}, []string{"reason"}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_ws_closes_total",
			Help: "Closed WebSocket connections by reason (peer, shutdown, too_big, write_timeout, pong_timeout, slow_consumer, flood, evicted).",
		}, []string{"reason"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_ws_rejected_total",
			Help: "WebSocket connections refused, by reason (subprotocol, handshake, max_sockets, max_sockets_per_client, shutting_down).",
		}, []string{"reason"}),
		clientErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_ws_error_frames_total",
			Help: "Error frames sent, by status code.",
		}, []string{"code"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubegate_ws_evicted_total",
			Help: "Sockets given up, at the gateway's socket limit, by the client holding the most, to admit a client holding fewer.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.sockets, m.subscriptions, m.frames, m.events, m.bytes, m.resets, m.closes, m.rejected, m.clientErrors, m.evicted)
	}
	return m
}
