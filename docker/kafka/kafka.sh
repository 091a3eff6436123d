#!/bin/sh
# The broker's configuration from the environment, the KRaft log formatted once, then Kafka.
#   KAFKA_HOST_ADVERTISED  host:port clients outside Docker reach listener 9092 at
#   KAFKA_NET_ADVERTISED   host:port containers on the Docker network reach listener 9094 at
set -euf  # -f: the classpath wildcard is for java, not the shell
HOST_ADVERTISED=${KAFKA_HOST_ADVERTISED:-localhost:9092}
NET_ADVERTISED=${KAFKA_NET_ADVERTISED:-$(hostname):9094}
DATA=/var/lib/kafka/data
CONFIG=/var/lib/kafka/server.properties
cat >"$CONFIG" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093
listeners=HOST://0.0.0.0:9092,CONTROLLER://127.0.0.1:9093,NET://0.0.0.0:9094
advertised.listeners=HOST://$HOST_ADVERTISED,NET://$NET_ADVERTISED
controller.listener.names=CONTROLLER
inter.broker.listener.name=NET
listener.security.protocol.map=CONTROLLER:PLAINTEXT,HOST:PLAINTEXT,NET:PLAINTEXT
log.dirs=$DATA
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
PROPERTIES
JAVA="java -Dlog4j2.configurationFile=/opt/kafka/log4j2.properties -cp /opt/kafka/libs/*"
if [ ! -e "$DATA/meta.properties" ]; then
  # a random cluster id, as `kafka-storage random-uuid` makes it
  id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' | sed 's/^-/A/')
  $JAVA kafka.tools.StorageTool format --ignore-formatted -t "$id" -c "$CONFIG"
fi
exec $JAVA -Xms256m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true kafka.Kafka "$CONFIG"
