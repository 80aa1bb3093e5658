package gw

import (
	"context"
	"net/http"

	"github.com/routeguard/routeguard/combo"
)

// streamRecovery is the router's stream recovery for a route: own, the
// combo's setting, when present, else resilience.streamRecovery; off when
// neither is set.
func streamRecovery(c *Config, own *StreamRecoveryConfig) combo.StreamRecovery {
	r := own
	if r == nil {
		r = c.Resilience.StreamRecovery
	}
	if r == nil {
		return combo.StreamRecovery{}
	}
	return combo.StreamRecovery{Early: r.Early, MidStream: r.MidStream, MaxContinuations: r.MaxContinuations}
}

// continuation is the router's Request.Continue for a chat request whose
// route continues broken streams: the client's body for t's model, with
// the text already sent as the assistant's partial answer.
func (s *Server) continuation(st *state, c *combo.Combo, cb chatBody, client http.Header) combo.ContinueFunc {
	if !c.Settings.StreamRecovery.MidStream {
		return nil
	}
	return func(ctx context.Context, t *combo.Target, partial string) (*http.Response, error) {
		body, err := combo.ContinuationBody(cb.withModel(t.Model), partial)
		if err != nil {
			return nil, err
		}
		return s.sendBody(ctx, st, t, body, client)
	}
}
