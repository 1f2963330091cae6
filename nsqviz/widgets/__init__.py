"""Views that render NSQ traffic: hex by grammar field (hexview), sequence diagram
(sequence), state machine (statemachine), sticky-packet playground (sticky), a stepping
session's steps (steps) and its stepper (stepper), capture replay (replay). Rendering
only: the protocol lives in nsqviz.nsq, sessions in nsqviz.clients.session (which imports no
view). Import the modules themselves: this package imports nothing, so that using one
view does not load ipywidgets or the others."""
