// Package shop is the root of stockguard shop, a flash-sale ("seckill")
// reference app that shows, measures and teaches the ways to keep stock
// from being oversold. The program is cmd/shop; README.md maps the
// packages. This package holds no code: its test checks docker-compose.yml.
package shop
