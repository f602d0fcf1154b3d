package sale

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// inProcess returns a Launcher that runs each instance inside this process
// as its own app.App: its own connection pools, its own strategy state (a
// `local` mutex is not shared), and its own HTTP listener on a loopback
// port, configured as cfg says.
func inProcess(cfg config.Config) Launcher {
	return func(ctx context.Context, name string, instances int) (Fleet, error) {
		cfg := cfg
		cfg.HTTPAddr, cfg.DebugAddr, cfg.Strategy, cfg.AdminToken = "127.0.0.1:0", "", name, rand.Text()
		if err := cfg.Validate(strategy.Names()); err != nil {
			return Fleet{}, err
		}
		f := Fleet{Shop: loadtest.Shop{AdminToken: cfg.AdminToken}}
		var stops []func() error
		f.Stop = func() ([]loadtest.Usage, error) {
			var errs []error
			for _, stop := range stops {
				errs = append(errs, stop())
			}
			return nil, errors.Join(errs...)
		}
		for range instances {
			url, stop, err := serveInProcess(ctx, cfg)
			if err != nil {
				_, stopErr := f.Stop()
				return Fleet{}, errors.Join(err, stopErr)
			}
			f.URLs = append(f.URLs, url)
			stops = append(stops, stop)
		}
		return f, nil
	}
}

func serveInProcess(ctx context.Context, cfg config.Config) (url string, stop func() error, err error) {
	a, err := app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return "", nil, errors.Join(err, a.Close())
	}
	srv := app.Server(cfg, cfg.HTTPAddr, a.Handler)
	go srv.Serve(ln)
	stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(srv.Shutdown(ctx), a.Close())
	}
	url = "http://" + ln.Addr().String()
	if err := loadtest.WaitReady(ctx, url); err != nil {
		return "", nil, errors.Join(err, stop())
	}
	return url, stop, nil
}
