"""controllerMode etcd's configuration: what every node must name, refused in one error."""

from __future__ import annotations

import pytest

from rocketport.core.config import BrokerConfig, InvalidConfig


def test_a_node_of_an_elected_group_names_etcd_its_master_role_and_its_own_id():
    config = BrokerConfig.from_mapping({"controllerMode": "etcd", "etcdEndpoints": "10.0.0.1:2379,10.0.0.2:2379",
                                        "brokerRole": "SYNC_MASTER", "brokerId": 2, "etcdLeaseTtl": 5})
    assert (config.controller_mode, config.broker_id, config.etcd_lease_ttl) == ("etcd", 2, 5)
    assert config.ha_listens  # an elected master always offers its HA port


def test_missing_endpoints_a_slave_role_and_brokerid_0_are_refused_together():
    with pytest.raises(InvalidConfig) as caught:
        BrokerConfig.from_mapping({"controllerMode": "etcd", "brokerRole": "SLAVE", "brokerId": 0})
    text = str(caught.value)
    assert "needs etcdEndpoints" in text and "not SLAVE" in text and "brokerId >= 1" in text


def test_without_an_election_the_classic_role_rules_stand():
    with pytest.raises(InvalidConfig, match="a master"):
        BrokerConfig.from_mapping({"brokerRole": "SYNC_MASTER", "brokerId": 2})
    with pytest.raises(InvalidConfig):
        BrokerConfig.from_mapping({"controllerMode": "zookeeper"})
