# The two commands of the README are `make lab` and `make test`; everything else is a helper.
.PHONY: lab test docs bench fuzz lint venv sysdeps clean

lab: venv
	scripts/lab.sh

test: venv
	scripts/test.sh

docs: venv
	scripts/docs.sh

# The benchmarks set the real NSQ programs beside ours: found as the tests find them
# (tests/conftest.py), in $$NSQVIZ_PEERS or else the machine's peers folder.
bench: venv
	NSQVIZ_PEERS="$${NSQVIZ_PEERS:-$(CURDIR)/../shared/peers}" .venv/bin/python -m benchmarks

fuzz: venv
	scripts/fuzz.sh

lint: venv
	.venv/bin/ruff check .

venv:
	scripts/bootstrap.sh

sysdeps:
	scripts/sysdeps.sh

clean:
	rm -rf .venv build *.egg-info .pytest_cache
