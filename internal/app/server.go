package app

import (
	"net/http"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/httpapi"
)

// Server returns a server of h on addr that holds its clients to cfg's
// timeouts: a client that sends its request too slowly, reads its answer
// too slowly or keeps an idle connection too long loses its connection,
// and with it the goroutine and the descriptor it held. Without them a few
// thousand clients that trickle their bodies hold as many of each for as
// long as they like.
func Server(cfg config.Config, addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:    addr,
		Handler: h,
		// It bounds the headers too: with no ReadHeaderTimeout of its own,
		// the server takes it for both.
		ReadTimeout:    cfg.ReadTimeout,
		WriteTimeout:   cfg.WriteTimeout,
		IdleTimeout:    cfg.IdleTimeout,
		MaxHeaderBytes: httpapi.MaxHeaderBytes,
	}
}
