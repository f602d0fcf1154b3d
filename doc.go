// Package shop is the root of stockguard shop, a flash-sale ("seckill")
// reference app that shows, measures and teaches the ways to keep stock
// from being oversold. The program is cmd/shop; docs/strategies.md#the-packages
// maps the packages. This package holds no code: its tests check
// docker-compose.yml and the links of the documentation.
package shop
