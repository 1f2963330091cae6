"""Views that render NSQ traffic: hex by grammar field (hexview), sequence diagram
(sequence), state machine (statemachine), sticky-packet playground (sticky), session
stepper (stepper). Rendering only: the protocol lives in nsqviz.nsq, sessions in
nsqviz.session. Import the modules themselves (this package imports nothing, so that
nsqviz.session.views and the stepper can depend on each other's modules freely)."""
