"""The ``errCode`` values the simulator answers with, by their ``TErrCodeConstants``
names, read from the codec's error table (:data:`nsqviz.tubemq.tables.ERRORS`)."""

from nsqviz.tubemq.tables import ERRORS

_BY_NAME = {e.name: e.code for e in ERRORS.values()}

SUCCESS = _BY_NAME["SUCCESS"]
BAD_REQUEST = _BY_NAME["BAD_REQUEST"]
UNAUTHORIZED = _BY_NAME["UNAUTHORIZED"]
FORBIDDEN = _BY_NAME["FORBIDDEN"]
NOT_FOUND = _BY_NAME["NOT_FOUND"]
PARTITION_OCCUPIED = _BY_NAME["PARTITION_OCCUPIED"]
HB_NO_NODE = _BY_NAME["HB_NO_NODE"]
DUPLICATE_PARTITION = _BY_NAME["DUPLICATE_PARTITION"]
CLIENT_INCONSISTENT_TOPICSET = _BY_NAME["CLIENT_INCONSISTENT_TOPICSET"]
TOPIC_NOT_DEPLOYED = _BY_NAME["TOPIC_NOT_DEPLOYED"]
