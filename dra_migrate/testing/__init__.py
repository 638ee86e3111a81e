"""Test doubles for dra-migrate's own tests and for tools built on it. Product code never imports this
package (an import contract in `make lint` fails if it does)."""
